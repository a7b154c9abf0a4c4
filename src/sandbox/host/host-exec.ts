import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { mkdir, readdir, stat, unlink } from "node:fs/promises";
import path from "node:path";
import type { Readable } from "node:stream";

import { AbortedError, SandboxError, type Logger } from "../../common/index.js";
import type { ExecOptions, ExecResult } from "../sandbox.js";
import {
  commandWithEnv,
  interpretStatus,
  newRunId,
  scriptInvocation,
} from "../shell/command-line.js";
import { throwIfRefused, wrapperRefusalStatus } from "../shell/exec-wrapper.js";
import { shellScript } from "../shell/shell-scripts.js";
import {
  keptLogs,
  OutputCapture,
  type OutputLog,
  type StreamName,
} from "../shell/output-capture.js";
import type { ScriptRunner } from "../shell/script-runner.js";
import type { ConfinedPaths } from "./confined-paths.js";

const defaultMaxOutputBytes = 1024 * 1024;
const killGraceMs = 5_000;
/** How long output may keep flowing after the wrapper exited. */
const outputGraceMs = 2_000;

export interface HostExecContext {
  paths: ConfinedPaths;
  /** The scrubbed environment every command gets. */
  env: Readonly<Record<string, string>>;
  /** Private directory for pid files (`run/`) and full output logs (`logs/`). */
  stateDirectory: string;
  logger: Logger;
}

/** Spawns one of cordon's bash programs on the host with the scrubbed environment. */
function spawnScript(
  context: HostExecContext,
  script: string,
  args: string[],
  stdin: "pipe" | "ignore",
): ChildProcess {
  const invocation = scriptInvocation(script, args);
  const env: Record<string, string> = { ...context.env, CORDON_STATE: context.stateDirectory };
  for (const entry of invocation.env) {
    const at = entry.indexOf("=");
    env[entry.slice(0, at)] = entry.slice(at + 1);
  }
  return spawn(invocation.cmd[0] ?? "bash", invocation.cmd.slice(1), {
    cwd: context.paths.root,
    env,
    // Its own process group, so the wrapper itself can be killed as a group if all else fails.
    detached: true,
    stdio: [stdin, "pipe", "pipe"],
  });
}

/**
 * exec of the host backend: the same wrapper as in a container (own session, marked tree,
 * leftovers killed at exit), run with the workspace root as the boundary for the working
 * directory and the scrubbed environment.
 */
export async function runHostCommand(
  context: HostExecContext,
  command: string,
  options: ExecOptions,
): Promise<ExecResult> {
  const signal = options.signal;
  if (signal?.aborted) throw new AbortedError("the command was aborted before it started");
  const { paths } = context;
  const requested = paths.lexical(options.cwd ?? ".");
  // Resolved here as well as in the wrapper: Node's realpath is the kernel's answer.
  const cwd = await paths.follow(requested);
  const id = newRunId("x");
  const capture = new OutputCapture({
    maxBytes: options.maxOutputBytes ?? defaultMaxOutputBytes,
    openLog: () => openHostLog(path.join(context.stateDirectory, "logs", `${id}.log`)),
    onStdout: options.onStdout,
    onStderr: options.onStderr,
  });
  const started = performance.now();
  const child = spawnScript(
    context,
    shellScript("execWrapper"),
    ["run", id, cwd, paths.root, commandWithEnv(command, options.env)],
    options.stdin === undefined ? "ignore" : "pipe",
  );
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>(
    (resolve, reject) => {
      child.on("error", reject);
      child.on("close", (code, deathSignal) => resolve({ code, signal: deathSignal }));
      // The wrapper has swept its tree when it exits; a process that escaped it and still holds
      // the output must not keep the call open: after a grace, stop reading.
      child.on("exit", () => {
        const timer = setTimeout(() => {
          child.stdout?.destroy();
          child.stderr?.destroy();
        }, outputGraceMs);
        child.once("close", () => clearTimeout(timer));
      });
    },
  );
  if (child.stdin && options.stdin !== undefined) {
    child.stdin.on("error", () => undefined);
    child.stdin.end(
      typeof options.stdin === "string" ? Buffer.from(options.stdin) : Buffer.from(options.stdin),
    );
  }
  let stopReason: "timeout" | "abort" | "failed" | undefined;
  let killing: Promise<void> | undefined;
  let pumpError: unknown;
  const pumping = Promise.all([
    pump(child.stdout, "stdout", capture),
    pump(child.stderr, "stderr", capture),
  ]).catch((error: unknown) => {
    // A callback threw: stop reading, and leave nothing running.
    pumpError = error;
    child.stdout?.destroy();
    child.stderr?.destroy();
    stop("failed");
  });

  const stop = (reason: "timeout" | "abort" | "failed"): void => {
    if (stopReason) return;
    stopReason = reason;
    killing = (async () => {
      const killer = spawnScript(context, shellScript("execWrapper"), ["kill", id], "ignore");
      await once(killer, "close").catch(() => undefined);
      const timer = setTimeout(() => killGroup(child), killGraceMs);
      await closed.catch(() => undefined);
      clearTimeout(timer);
    })();
  };
  const onAbort = (): void => stop("abort");
  signal?.addEventListener("abort", onAbort, { once: true });
  const timer =
    options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => stop("timeout"), options.timeoutMs);
  if (signal?.aborted) stop("abort");

  let exit: { code: number | null; signal: NodeJS.Signals | null };
  try {
    exit = await closed;
  } catch (error) {
    throw new SandboxError(`cannot run bash on this host: ${(error as Error).message}`, {
      cause: error,
      fix: "install bash (and util-linux for setsid); mode off runs commands on the host",
    });
  } finally {
    if (timer) clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
  await pumping;
  await killing;
  if (pumpError !== undefined) {
    throw pumpError instanceof Error
      ? pumpError
      : new SandboxError("reading the command's output failed", { cause: pumpError });
  }
  const durationMs = Math.round(performance.now() - started);
  const output = await capture.finish();
  if (stopReason === "abort") {
    throw new AbortedError("the command was aborted; its processes were killed");
  }
  const status = exit.code ?? 128 + 9;
  if (status === wrapperRefusalStatus) throwIfRefused(id, cwd, output.stderr);
  // A timer that fired as the command was finishing on its own did not kill it.
  const timedOut = stopReason === "timeout" && status === 137;
  const interpreted = timedOut ? { exitCode: null, signal: "SIGKILL" } : interpretStatus(status);
  context.logger.debug({ run: id, status, durationMs }, "host exec finished");
  return {
    exitCode: interpreted.exitCode,
    ...(interpreted.signal === undefined ? {} : { signal: interpreted.signal }),
    stdout: output.stdout,
    stderr: output.stderr,
    truncated: output.truncated,
    ...(output.fullOutputPath === undefined ? {} : { fullOutputPath: output.fullOutputPath }),
    timedOut,
    // The host has no per-sandbox memory limit to be killed by.
    oomKilled: false,
    durationMs,
  };
}

async function pump(
  stream: Readable | null,
  name: StreamName,
  capture: OutputCapture,
): Promise<void> {
  if (!stream) return;
  for await (const chunk of stream) await capture.push(name, chunk as Buffer);
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}

async function openHostLog(file: string): Promise<OutputLog> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  await pruneLogs(path.dirname(file));
  const stream = createWriteStream(file, { flags: "wx", mode: 0o600 });
  await once(stream, "open");
  return {
    path: file,
    write: async (chunk) => {
      if (!stream.write(chunk)) await once(stream, "drain");
    },
    close: async () => {
      stream.end();
      try {
        await once(stream, "finish");
        return true;
      } catch {
        return false;
      }
    },
  };
}

/** Keeps the newest logs (one fewer than `keptLogs`, making room for the new one). */
async function pruneLogs(directory: string): Promise<void> {
  const names = (await readdir(directory)).filter((name) => name.endsWith(".log"));
  const dated = await Promise.all(
    names.map(async (name) => {
      const info = await stat(path.join(directory, name)).catch(() => undefined);
      return { name, mtimeMs: info?.mtimeMs ?? 0 };
    }),
  );
  dated.sort((a, b) => b.mtimeMs - a.mtimeMs);
  for (const { name } of dated.slice(keptLogs - 1)) {
    await unlink(path.join(directory, name)).catch(() => undefined);
  }
}

/** Runs cordon's short programs on the host (the background-process table uses it). */
export class HostScriptRunner implements ScriptRunner {
  constructor(private readonly context: HostExecContext) {}

  async run(
    request: { cmd: string[]; env?: string[] | undefined; stdin?: Uint8Array | undefined },
    signal?: AbortSignal,
  ): Promise<{ exitCode: number; stdout: Buffer; stderr: Buffer }> {
    if (signal?.aborted) throw new AbortedError("the sandbox operation was aborted");
    const env: Record<string, string> = {
      ...this.context.env,
      CORDON_STATE: this.context.stateDirectory,
    };
    for (const entry of request.env ?? []) {
      const at = entry.indexOf("=");
      env[entry.slice(0, at)] = entry.slice(at + 1);
    }
    const child = spawn(request.cmd[0] ?? "bash", request.cmd.slice(1), {
      cwd: this.context.paths.root,
      env,
      stdio: [request.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout?.on("data", (chunk: Buffer) => stdout.push(chunk));
    child.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk));
    if (child.stdin && request.stdin) {
      child.stdin.on("error", () => undefined);
      child.stdin.end(Buffer.from(request.stdin));
    }
    const onAbort = (): void => {
      child.kill("SIGKILL");
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const [code] = (await once(child, "close")) as [number | null];
      if (signal?.aborted) throw new AbortedError("the sandbox operation was aborted");
      return {
        exitCode: code ?? 137,
        stdout: Buffer.concat(stdout),
        stderr: Buffer.concat(stderr),
      };
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }
}
