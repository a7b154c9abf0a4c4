import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { constants } from "node:os";
import type { Readable, Writable } from "node:stream";

import { SandboxError } from "../../common/index.js";
import {
  runCollected,
  type ExecRequest,
  type ExecTransport,
  type OutputHandler,
  type CommandRequest,
  type CommandResult,
  type RunningExec,
} from "../shell/exec-transport.js";
import type { StreamName } from "../shell/output-capture.js";

/** How long output may keep flowing after the process exited (an escapee holding the pipe). */
const outputGraceMs = 2_000;

export interface HostTransportOptions {
  /** The directory every process starts in (the workspace root). */
  cwd: string;
  /** The scrubbed environment every process gets. */
  env: Readonly<Record<string, string>>;
  /** The exec wrapper's private state directory (`CORDON_STATE`: pid files, OOM marks). */
  stateDirectory: string;
}

/**
 * The exec transport of mode off: each process is a child of this Node process, with the
 * scrubbed environment, in a process group of its own. `runCommand`, the file-free process
 * table and output logs run over it exactly as they do over a container's transport.
 */
export class HostTransport implements ExecTransport {
  readonly containerName = "host";

  constructor(private readonly options: HostTransportOptions) {}

  start(request: ExecRequest): Promise<RunningExec> {
    const env: Record<string, string> = {
      ...this.options.env,
      CORDON_STATE: this.options.stateDirectory,
    };
    for (const entry of request.env ?? []) {
      const at = entry.indexOf("=");
      env[entry.slice(0, at)] = entry.slice(at + 1);
    }
    const child = spawn(request.cmd[0] ?? "bash", request.cmd.slice(1), {
      cwd: request.workingDir ?? this.options.cwd,
      env,
      // Its own process group, so `detach` can kill it as a group if all else failed.
      detached: true,
      stdio: [request.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
    let cutOff = false;
    const cut = (): void => {
      cutOff = true;
      child.stdout?.destroy();
      child.stderr?.destroy();
    };
    // A handler that throws fails the call at once (the caller then kills what runs); reading
    // that ends because it was cut off on purpose is no failure.
    const pumping = Promise.all([
      pump(child.stdout, "stdout", request.onOutput),
      pump(child.stderr, "stderr", request.onOutput),
    ]).catch((error: unknown) => {
      const failed = !cutOff;
      cut();
      if (failed) {
        throw error instanceof Error
          ? error
          : new SandboxError("reading the command's output failed", { cause: error });
      }
    });
    if (child.stdin && request.stdin !== undefined) feed(child.stdin, request.stdin);
    const closed = new Promise<number>((resolve, reject) => {
      child.on("error", (error) =>
        reject(
          new SandboxError(
            `cannot run ${request.cmd[0] ?? "bash"} on this host: ${error.message}`,
            {
              cause: error,
              fix: "install bash (and util-linux for setsid); mode off runs commands on the host",
            },
          ),
        ),
      );
      child.on("close", (code, signal) => resolve(code ?? 128 + signalNumber(signal)));
      // The wrapper swept its tree when it exits; a process that escaped it and still holds the
      // output must not keep the call open: after a grace, stop reading.
      child.on("exit", () => {
        const timer = setTimeout(cut, outputGraceMs);
        child.once("close", () => clearTimeout(timer));
      });
    });
    const exitCode = Promise.all([closed, pumping]).then(([status]) => status);
    exitCode.catch(() => undefined);
    return Promise.resolve({
      exitCode,
      detach: () => {
        cut();
        killGroup(child);
      },
      keepAlive: () => undefined,
    });
  }

  run(request: CommandRequest, signal?: AbortSignal): Promise<CommandResult> {
    return runCollected((started) => this.start(started), request, signal);
  }

  /** The host does not go away under a command. */
  async assertRunning(): Promise<void> {}
}

async function pump(stream: Readable | null, name: StreamName, onOutput: OutputHandler) {
  if (!stream) return;
  for await (const chunk of stream) await onOutput(name, chunk as Buffer);
}

function feed(stdin: Writable, data: Uint8Array | AsyncIterable<Uint8Array>): void {
  stdin.on("error", () => undefined);
  if (data instanceof Uint8Array) {
    stdin.end(data);
    return;
  }
  void (async () => {
    for await (const chunk of data) {
      if (!stdin.write(chunk)) await once(stdin, "drain");
    }
    stdin.end();
  })().catch(() => stdin.destroy());
}

/** The host's last resort: the wrapper's whole process group, where its sweep did not reach. */
function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}

function signalNumber(signal: NodeJS.Signals | null): number {
  return signal ? constants.signals[signal] : constants.signals.SIGKILL;
}
