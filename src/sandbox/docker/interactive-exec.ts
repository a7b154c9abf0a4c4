import { randomUUID } from "node:crypto";
import type { Duplex } from "node:stream";

import { sleep } from "../../common/index.js";
import type { ContainerClient, ExecStatus, StartedExec } from "./client/index.js";
import { toSandboxError } from "./docker-errors.js";
import type { DockerEngine } from "./engine.js";
import { DemuxStream } from "./exec/demux-stream.js";

/** A terminal size, in character cells. */
export interface TerminalSize {
  rows: number;
  columns: number;
}

export interface InteractiveExecRequest {
  /** The sandbox's container (its name: a container replaced by recovery keeps it). */
  containerName: string;
  /** "uid:gid", the sandbox's user. */
  user: string;
  workingDir: string;
  cmd: string[];
  /** Extra environment (`NAME=value`) on top of the container's. */
  env?: string[] | undefined;
  /** Allocate a pseudo-terminal: output arrives raw on one stream, as a terminal shows it. */
  tty: boolean;
  /**
   * With `tty`: the caller's terminal size. The command starts only once the pseudo-terminal has
   * it (or after 2 s), so its first `stty size` never reads 0 0.
   */
  initialSize?: TerminalSize | undefined;
  /** Streamed to the command's stdin; its end is end-of-file there. Unset: stdin is not attached. */
  stdin?: NodeJS.ReadableStream | undefined;
  /** Receives the command's stdout (with a TTY: everything it writes). */
  onStdout: (chunk: Uint8Array) => void;
  onStderr: (chunk: Uint8Array) => void;
}

/** A started interactive command. */
export interface InteractiveExec {
  /** Its exit code, once its output has ended; -1 when it was detached. */
  readonly exitCode: Promise<number>;
  /** Tells the pseudo-terminal its new size (the command gets SIGWINCH). */
  resize(size: TerminalSize): Promise<void>;
  /**
   * Hangs up: the command's process group gets SIGHUP (as when a terminal closes) and the
   * connection is closed. Docker itself would leave it running, e.g. a shell waiting on a
   * terminal nobody holds, which would keep the sandbox busy for good.
   */
  hangUp(): Promise<void>;
}

/** Where the command's pid is kept, so a hang-up can reach its process group. */
const pidDirectory = "/tmp/.cordon/interactive";

/**
 * Records the pid, then becomes the command (`exec`: the same process, so the process group
 * and the terminal's foreground group are the command's own; runc makes every exec a session
 * leader).
 */
const recordPid = `mkdir -p ${pidDirectory} && echo $$ > "$0" && exec "$@"`;
/**
 * The same, once the pseudo-terminal has a size: the engine takes a resize only after the process
 * is running, so the first one can be refused and a fast command would see 0 0. Waits 2 s at most;
 * without stty the size is never "0 0" and nothing waits.
 */
const recordPidWithSize = `n=0; while [ "$(stty size 2>/dev/null)" = "0 0" ] && [ $n -lt 100 ]; do sleep 0.02; n=$((n+1)); done; ${recordPid}`;
/** When the initial size is sent again: a resize before the process runs is refused silently. */
const initialResizeDelaysMs = [0, 20, 50, 100, 200, 400, 800, 1500];
/** SIGHUP to the recorded process group; the pid file goes either way. */
const hangUpGroup =
  'p=$(cat "$0" 2>/dev/null) && [ -n "$p" ] && kill -HUP -- "-$p" 2>/dev/null; rm -f "$0"';

/**
 * One command in a sandbox with the caller's stdin attached and, with `tty`, a pseudo-terminal:
 * what `docker exec -i [-t]` does, as the sandbox's user in its working directory. Separate from
 * the tools' exec path (`ContainerExec`): no wrapper, no output cap, no capture — the bytes go to
 * the person at the terminal, who is driving the command.
 */
export async function startInteractiveExec(
  engine: DockerEngine,
  request: InteractiveExecRequest,
): Promise<InteractiveExec> {
  const containers = engine.containers;
  const container = request.containerName;
  const attachStdin = request.stdin !== undefined;
  const pidFile = `${pidDirectory}/${randomUUID()}.pid`;
  // The latest size asked for: the early retries send it, so a resize during them is kept.
  let latestSize = request.initialSize;
  const waitsForSize =
    request.tty && latestSize !== undefined && latestSize.rows > 0 && latestSize.columns > 0;
  const exec = await containers.exec(container, {
    cmd: ["/bin/sh", "-c", waitsForSize ? recordPidWithSize : recordPid, pidFile, ...request.cmd],
    user: request.user,
    workingDir: request.workingDir,
    env: request.env ?? [],
    attachStdin,
    tty: request.tty,
  });
  const socket: Duplex = exec.stream;

  let detached = false;
  const ended = new Promise<void>((resolve, reject) => {
    socket.on("error", (error) => (detached ? resolve() : reject(error)));
    socket.on("close", () => resolve());
    if (request.tty) {
      // One raw stream: stdout and stderr are the same terminal.
      socket.on("data", (chunk: Buffer) => request.onStdout(chunk));
      socket.on("end", () => resolve());
    } else {
      const demux = new DemuxStream((stream, chunk) =>
        stream === "stderr" ? request.onStderr(chunk) : request.onStdout(chunk),
      );
      demux.on("finish", () => resolve());
      demux.on("error", reject);
      socket.pipe(demux);
    }
  });
  if (request.stdin) feedStdin(request.stdin, socket);
  if (waitsForSize) {
    // Idempotent: the same size again changes nothing and signals nothing.
    const resendLatest = (): void => {
      if (latestSize) void exec.resize({ rows: latestSize.rows, columns: latestSize.columns });
    };
    for (const delay of initialResizeDelaysMs) setTimeout(resendLatest, delay).unref();
  }

  const exitCode = ended.then(
    async () => {
      if (detached) return -1;
      const code = await exitCodeOf(exec, request.containerName);
      await runQuietly(containers, container, request.user, [
        "/bin/sh",
        "-c",
        'rm -f "$0"',
        pidFile,
      ]);
      return code;
    },
    (error: unknown) => {
      throw toSandboxError(error, `stream a command's output from ${request.containerName}`);
    },
  );
  // A caller that detaches may never await it.
  exitCode.catch(() => undefined);
  return {
    exitCode,
    resize: async ({ rows, columns }) => {
      if (!request.tty || rows <= 0 || columns <= 0) return;
      latestSize = { rows, columns };
      await exec.resize({ rows, columns });
    },
    hangUp: async () => {
      detached = true;
      await runQuietly(containers, container, request.user, [
        "/bin/sh",
        "-c",
        hangUpGroup,
        pidFile,
      ]);
      socket.destroy();
    },
  };
}

/** Copies `stdin` into the connection; its end half-closes it (end-of-file in the command). */
function feedStdin(stdin: NodeJS.ReadableStream, socket: Duplex): void {
  const onData = (chunk: Buffer | string): void => {
    if (socket.destroyed || socket.writableEnded) return;
    if (!socket.write(chunk)) {
      stdin.pause();
      socket.once("drain", () => stdin.resume());
    }
  };
  const onEnd = (): void => {
    if (!socket.destroyed && !socket.writableEnded) socket.end();
  };
  stdin.on("data", onData);
  stdin.once("end", onEnd);
  socket.once("close", () => {
    stdin.off("data", onData);
    stdin.off("end", onEnd);
    // Our stdin no longer has a reader; let the process exit instead of waiting on it.
    stdin.pause();
  });
}

/** Runs a short housekeeping command to its end; a failure only means it could not help. */
async function runQuietly(
  containers: ContainerClient,
  container: string,
  user: string,
  cmd: string[],
): Promise<void> {
  try {
    const { stream } = await containers.exec(container, { cmd, user, attachStdin: false });
    await new Promise<void>((resolve) => {
      stream.on("end", resolve);
      stream.on("close", resolve);
      stream.on("error", () => resolve());
      stream.resume();
    });
  } catch {
    // The container is gone or stopped: so is the command.
  }
}

async function exitCodeOf(exec: StartedExec, containerName: string): Promise<number> {
  // The output can end a moment before the engine records the exit.
  for (let attempt = 0; attempt < 200; attempt++) {
    let info: ExecStatus;
    try {
      info = await exec.status();
    } catch (error) {
      throw toSandboxError(error, `read a command's exit status in ${containerName}`);
    }
    if (!info.running && info.exitCode !== null) return info.exitCode;
    await sleep(attempt < 20 ? 5 : 25);
  }
  throw toSandboxError(
    new Error("the engine did not report the command's exit status"),
    `read a command's exit status in ${containerName}`,
  );
}
