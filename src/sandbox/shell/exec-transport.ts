import { AbortedError, throwIfAborted, withAbort } from "../../common/index.js";
import type { StreamName } from "./output-capture.js";
import type { ScriptRunner } from "./script-runner.js";

/** Takes one chunk of a process's output; a returned promise holds back further output. */
export type OutputHandler = (stream: StreamName, chunk: Uint8Array) => void | Promise<void>;

/** One process started in the sandbox (a container, or the host in mode off). */
export interface ExecRequest {
  cmd: string[];
  /** Extra environment (`NAME=value`) on top of the container's. */
  env?: string[] | undefined;
  /** Default "/": the sandbox resolves paths itself. */
  workingDir?: string | undefined;
  /**
   * Bytes for the process's stdin, then end-of-file; an async iterable streams them with
   * backpressure. Undefined: stdin is not attached (the process reads end-of-file at once).
   */
  stdin?: Uint8Array | AsyncIterable<Uint8Array> | undefined;
  onOutput: OutputHandler;
  /**
   * Set when `cmd` is the exec wrapper's `run` mode (exec-wrapper.sh): the same call described,
   * so a transport that does the wrapper's work itself (the resident executor) can start
   * the command's shell directly instead of the wrapper's bash program. Others run `cmd`.
   */
  wrapped?: WrappedRun | undefined;
}

/** The arguments of the exec wrapper's `run ID CWD ROOT COMMAND`, and its state directory. */
export interface WrappedRun {
  id: string;
  cwd: string;
  root: string;
  command: string;
  /** Where an OOM kill is marked (`oomMarkerPath`). */
  stateDirectory: string;
}

/**
 * Stdin in two parts: `first` when the process starts, `rest` once the caller has it (undefined:
 * nothing more), then end-of-file. For a process started ahead of its request, which it reads
 * from stdin: a spare inspector's recorder (checkpoint-copy.sh `ahead`) has started, and read
 * what does not depend on the copy, before a turn's record is asked of it. An ordinary stream
 * to every transport; the resident executor sends it as frames on its open stream, as it does
 * bytes, rather than falling back to a Docker exec as for other streams.
 */
export class HeldStdin implements AsyncIterable<Uint8Array> {
  constructor(
    readonly first: Uint8Array,
    readonly rest: Promise<Uint8Array | undefined>,
  ) {}

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    yield this.first;
    const rest = await this.rest;
    if (rest) yield rest;
  }
}

/** A started process: wait for it, or cut it off. */
export interface RunningExec {
  /** The exit status (128 + N for a death by signal N) once its output has ended. */
  readonly exitCode: Promise<number>;
  /** Stops reading and closes its streams. The process keeps running: kill it separately. */
  detach(): void;
  /**
   * Whether the open connection keeps the Node process alive (default yes). A resident stream
   * holds it only while calls are pending, so a finished CLI run can exit.
   */
  keepAlive(active: boolean): void;
}

/** A short program run to the end (`ExecTransport.run`). */
export type CommandRequest = Omit<ExecRequest, "onOutput"> & {
  /** Takes stdout instead of collecting it (the result's stdout is then empty). */
  onStdout?: ((chunk: Uint8Array) => void) | undefined;
};

export interface CommandResult {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
}

/**
 * The fast paths of a resident executor for the most frequent file operations, done in-process
 * instead of by the file script. Each answers `undefined` when it did not handle the case (an
 * error, a symbolic link, a fifo, ...): the caller then runs the file script, whose result and
 * error messages are the reference, so nothing reads differently with or without them.
 */
export interface FastFileOperations {
  /** The whole file when it is a readable regular file of at most `maxBytes` (+1 byte if it grew). */
  read(path: string, maxBytes: number, signal?: AbortSignal): Promise<Uint8Array | undefined>;
  /** True when written (replaced atomically, keeping an existing file's mode). */
  write(
    path: string,
    data: Uint8Array,
    mode: number,
    createParents: boolean,
    signal?: AbortSignal,
  ): Promise<boolean | undefined>;
  /** The file script's `stat` line ("KIND|SIZE|MODE|MTIME" or "none"). */
  stat(path: string, signal?: AbortSignal): Promise<string | undefined>;
}

/**
 * How commands and file operations reach a sandbox: one process per call through the Docker exec
 * API (`ContainerExec`), a resident executor inside the container that starts them over one open
 * stream (`ResidentTransport`), or a child process on the host (`HostTransport`, mode off).
 * Everything above (the exec wrapper and `runCommand`, file scripts, background processes, tree
 * copies) is written once against this.
 */
export interface ExecTransport extends ScriptRunner {
  readonly containerName: string;
  start(request: ExecRequest): Promise<RunningExec>;
  /**
   * Runs to the end and collects both streams whole (for short commands with bounded output).
   * Aborting cuts the connection and rejects with `AbortedError`; the command must be one that
   * an early end-of-file on stdin and a closed output leave harmless.
   */
  run(request: CommandRequest, signal?: AbortSignal): Promise<CommandResult>;
  /**
   * Throws the "container stopped" error when the container is not running, waiting up to
   * `settleMs` for a container that is being killed to say so.
   */
  assertRunning(action: string, settleMs?: number): Promise<void>;
  /** Present when the transport has in-process file fast paths. */
  readonly fastFiles?: FastFileOperations | undefined;
  /**
   * Present when the transport runs `wrapped` calls itself: kills the process tree of run `id`
   * the way the wrapper's `kill` mode does. False when it did not start that run (it went by the
   * wrapper, or its executor stopped): the caller then runs the wrapper's `kill` mode.
   */
  killWrapped?(id: string): Promise<boolean>;
}

/** `ExecTransport.run` over `start`: the same collecting and abort handling for every transport. */
export async function runCollected(
  start: (request: ExecRequest) => Promise<RunningExec>,
  request: CommandRequest,
  signal?: AbortSignal,
): Promise<CommandResult> {
  throwIfAborted(signal, "the sandbox operation");
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const running = await start({
    ...request,
    onOutput: (stream, chunk) => {
      if (stream === "stdout" && request.onStdout) {
        request.onStdout(chunk);
        return;
      }
      // Views, not copies: each payload is a slice of a buffer nothing else reuses.
      (stream === "stdout" ? out : err).push(
        Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength),
      );
    },
  });
  let aborted = false;
  const exitCode = await withAbort(signal, running.exitCode, () => {
    aborted = true;
    running.detach();
  });
  if (aborted) {
    throw new AbortedError("the sandbox operation was aborted", { cause: signal?.reason });
  }
  return { exitCode, stdout: Buffer.concat(out), stderr: Buffer.concat(err) };
}
