import { spawn } from "node:child_process";
import { once } from "node:events";
import { readdir } from "node:fs/promises";

import type { ExecRequest, ExecTransport, RunningExec } from "../../../shell/exec-transport.js";

/**
 * The real executor binary run as a child process on this machine (the frames are the same as
 * in a container; no engine needed): its forwarded ports listen on this machine's loopback, and
 * its connections reach this machine's loopback.
 */
export interface LocalExecutor extends ExecTransport {
  /** The pid of the executor last started, once one is. */
  readonly pid: number | undefined;
  /**
   * How many descriptors the executor holds now (/proc/PID/fd); undefined when they cannot be
   * counted (the executor is not dumpable, so only root reads them).
   */
  descriptors(): Promise<number | undefined>;
}

export function localExecutor(binary: string): LocalExecutor {
  let pid: number | undefined;
  const start = (request: ExecRequest): Promise<RunningExec> => {
    const child = spawn(binary, [], { stdio: ["pipe", "pipe", "pipe"] });
    pid = child.pid;
    void (async () => {
      for await (const chunk of request.stdin as AsyncIterable<Uint8Array>) {
        if (!child.stdin.write(chunk)) await once(child.stdin, "drain");
      }
      child.stdin.end();
    })().catch(() => undefined);
    child.stdout.on("data", (chunk: Buffer) => void request.onOutput("stdout", chunk));
    child.stderr.on("data", (chunk: Buffer) => void request.onOutput("stderr", chunk));
    const exitCode = new Promise<number>((resolve) =>
      child.on("exit", (code, signal) => resolve(code ?? (signal ? 128 : 0))),
    );
    return Promise.resolve({ exitCode, detach: () => child.kill(), keepAlive: () => undefined });
  };
  return {
    containerName: "local-executor",
    get pid() {
      return pid;
    },
    descriptors: async () => {
      if (pid === undefined) return undefined;
      return readdir(`/proc/${pid}/fd`).then(
        (entries) => entries.length,
        () => undefined,
      );
    },
    start,
    run: () => Promise.reject(new Error("not in this test")),
    assertRunning: () => Promise.resolve(),
  };
}
