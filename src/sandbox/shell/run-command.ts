import { posix } from "node:path";

import { AbortedError, SandboxError, sleep, type Logger } from "../../common/index.js";
import type { ExecOptions, ExecResult } from "../sandbox.js";
import { ChunkChannel } from "./chunk-channel.js";
import { commandWithEnv, interpretStatus, newRunId, scriptInvocation } from "./command-line.js";
import type { ExecTransport } from "./exec-transport.js";
import {
  defaultStateDirectory,
  oomMarkerPath,
  throwIfRefused,
  wrapperRefusalStatus,
} from "./exec-wrapper.js";
import { keptLogs, OutputCapture, type OutputLog } from "./output-capture.js";
import { shellScript } from "./shell-scripts.js";

const defaultMaxOutputBytes = 1024 * 1024;
/** How long a killed command's output stream may take to end before the connection is cut. */
const killGraceMs = 5_000;

/** Where one shell-backed sandbox runs its commands. */
export interface CommandContext {
  transport: ExecTransport;
  /** Where a relative `cwd` resolves. */
  workdir: string;
  /**
   * The boundary the working directory must stay inside, checked by the wrapper after it
   * resolved the directory physically: "/" in a container, the workspace root on the host.
   */
  root: string;
  /**
   * Turns the caller's `cwd` into the path the wrapper enters; may refuse it with a
   * `FileOperationError`. Default: resolved against `workdir`, left to the wrapper to check.
   */
  resolveCwd?: ((cwd: string) => Promise<string>) | undefined;
  /** The wrapper's state directory (`CORDON_STATE`, where OOM marks go); default /tmp/.cordon. */
  stateDirectory?: string | undefined;
  /** Where full output logs go (in the sandbox's view), the newest `keptLogs` of them kept. */
  logDirectory: string;
  logger: Logger;
}

/**
 * The one exec implementation of every shell-backed sandbox (a container by plain exec or its
 * resident executor, the host in mode off): runs one command under the exec wrapper (its own
 * session, a marker for the tree, leftovers killed at exit), streaming and capping its output,
 * killing the whole tree on timeout or abort, and telling an OOM kill from other deaths.
 */
export async function runCommand(
  context: CommandContext,
  command: string,
  options: ExecOptions,
): Promise<ExecResult> {
  const { transport, logger } = context;
  const signal = options.signal;
  if (signal?.aborted) throw new AbortedError("the command was aborted before it started");
  const requested = options.cwd ?? ".";
  const cwd = context.resolveCwd
    ? await context.resolveCwd(requested)
    : posix.resolve(context.workdir, requested);
  const id = newRunId("x");
  const script = commandWithEnv(command, options.env);
  const capture = new OutputCapture({
    maxBytes: options.maxOutputBytes ?? defaultMaxOutputBytes,
    openLog: () => openSandboxLog(transport, `${context.logDirectory}/${id}.log`),
    onStdout: options.onStdout,
    onStderr: options.onStderr,
  });
  const stdin =
    options.stdin === undefined
      ? undefined
      : typeof options.stdin === "string"
        ? new TextEncoder().encode(options.stdin)
        : options.stdin;

  const started = performance.now();
  logger.debug({ run: id, cwd }, "exec starting");
  const stateDirectory = context.stateDirectory ?? defaultStateDirectory;
  const running = await transport.start({
    ...scriptInvocation(shellScript("execWrapper"), ["run", id, cwd, context.root, script]),
    wrapped: { id, cwd, root: context.root, command: script, stateDirectory },
    stdin,
    onOutput: (stream, chunk) => capture.push(stream, chunk),
  });

  let stopReason: "timeout" | "abort" | undefined;
  let killing: Promise<void> | undefined;
  const stop = (reason: "timeout" | "abort"): void => {
    if (stopReason) return;
    stopReason = reason;
    logger.debug({ run: id, reason }, "exec killing its process tree");
    killing = killTree(transport, id)
      .catch((error: unknown) => {
        logger.warn({ run: id, err: error }, "killing a command's process tree failed");
      })
      .then(async () => {
        // The stream ends once the last process holding it is gone; do not wait forever.
        const timer = setTimeout(() => running.detach(), killGraceMs);
        await running.exitCode.catch(() => undefined);
        clearTimeout(timer);
      });
  };
  const onAbort = (): void => stop("abort");
  signal?.addEventListener("abort", onAbort, { once: true });
  const timer =
    options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => stop("timeout"), options.timeoutMs);
  if (signal?.aborted) stop("abort");

  let status: number;
  try {
    status = await running.exitCode;
  } catch (error) {
    if (!stopReason) {
      // The stream broke (a callback threw, the engine went away): leave nothing running.
      running.detach();
      await killTree(transport, id).catch(() => undefined);
      throw error;
    }
    status = 137;
  } finally {
    if (timer) clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
  await killing;
  const durationMs = Math.round(performance.now() - started);
  const output = await capture.finish();

  if (stopReason === "abort") {
    throw new AbortedError("the command was aborted; its processes were killed");
  }
  if (status === wrapperRefusalStatus) throwIfRefused(id, cwd, output.stderr);

  // A timer that fired as the command was finishing on its own did not kill it.
  const timedOut = stopReason === "timeout" && (status === 137 || status < 0);
  const { exitCode, signal: deathSignal } = timedOut
    ? { exitCode: null, signal: "SIGKILL" }
    : interpretStatus(status);
  const oomKilled =
    status === 137 &&
    !stopReason &&
    (await wasOomKilled(transport, oomMarkerPath(id, stateDirectory)));
  logger.debug({ run: id, status, durationMs, oomKilled }, "exec finished");
  return {
    exitCode,
    ...(deathSignal === undefined ? {} : { signal: deathSignal }),
    stdout: output.stdout,
    stderr: output.stderr,
    truncated: output.truncated,
    ...(output.fullOutputPath === undefined ? {} : { fullOutputPath: output.fullOutputPath }),
    timedOut,
    oomKilled,
    durationMs,
  };
}

/**
 * Docker's status for an exec whose process the runtime could not start. Under a full pids limit
 * (a fork bomb) runc's init often cannot clone ("read init-p: connection reset by peer"): joining
 * the cgroup is not a fork, but starting the process in it is, so some attempts get in, some not.
 */
const execNotStarted = 126;
/** Tries at the wrapper's kill: each fails at most as often as a bomb wins one race for a pid. */
const killAttempts = 30;
const killRetryMs = 100;

/**
 * Kills every process of run (or background process) `id`: by the resident executor when it ran
 * the command (no process is started, so a full pids limit cannot stop it), otherwise by the
 * wrapper's `kill` mode, a process of its own, started again until it gets in. A bomb frees no
 * pid by itself, so one refused start is no reason to leave its tree running.
 */
export async function killTree(transport: ExecTransport, id: string): Promise<void> {
  if (await transport.killWrapped?.(id)) return;
  const kill = scriptInvocation(shellScript("execWrapper"), ["kill", id]);
  for (let attempt = 1; ; attempt += 1) {
    const result = await transport.run(kill);
    if (result.exitCode !== execNotStarted) return;
    if (attempt === killAttempts) {
      throw new SandboxError(
        `the processes of command ${id} could not be killed: the sandbox refused ${killAttempts} ` +
          `starts of the kill (is its pids limit full?): ${result.stdout.toString("utf8").trim()}`,
        { fix: "remove the sandbox (`cordon sandbox rm`); a new one starts clean" },
      );
    }
    await sleep(killRetryMs);
  }
}

/**
 * After a SIGKILL cordon did not send: the OOM killer (the wrapper left a mark), or the container
 * itself was killed, which must be an error, not a command result.
 */
async function wasOomKilled(transport: ExecTransport, marker: string): Promise<boolean> {
  const result = await transport
    .run({
      cmd: ["bash", "-c", '[[ -e $1 ]] || exit 1; rm -f -- "$1"; echo oom', "cordon", marker],
    })
    .catch(async (error: unknown) => {
      await transport.assertRunning("run a command");
      throw error;
    });
  if (result.exitCode === 0 && result.stdout.toString("utf8").trim() === "oom") return true;
  if (result.exitCode === 1) {
    // The check ran, yet the container may be on its way down: ask the engine, briefly.
    await transport.assertRunning("run a command", 300);
    return false;
  }
  await transport.assertRunning("run a command", 2_000);
  return false;
}

/** A log file inside the sandbox, written through the stdin of a `cat` run by the transport. */
async function openSandboxLog(transport: ExecTransport, path: string): Promise<OutputLog> {
  const channel = new ChunkChannel();
  const running = await transport.start({
    // The newest logs are kept, older ones removed: they share the container's small /tmp.
    cmd: [
      "bash",
      "-c",
      'mkdir -p -- "${1%/*}" && cd -- "${1%/*}" && { ls -1t -- *.log 2>/dev/null | tail -n +"$2" | xargs -r rm -f --; exec cat >"$1"; }',
      "cordon",
      path,
      String(keptLogs),
    ],
    stdin: channel,
    onOutput: () => undefined,
  });
  // If the writer dies (a full /tmp), stop feeding it rather than wait on it forever.
  const finished = running.exitCode.then(
    (status) => status === 0,
    () => false,
  );
  void finished.then(() => channel.close());
  return {
    path,
    write: (chunk) => channel.write(chunk),
    close: async () => {
      channel.close();
      return finished;
    },
  };
}
