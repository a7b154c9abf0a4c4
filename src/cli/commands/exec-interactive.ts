import { exitCodeOfAbort } from "../../common/index.js";
import { DockerEngine, startInteractiveExec } from "../../sandbox/index.js";

export interface InteractiveCommand {
  env: NodeJS.ProcessEnv;
  containerName: string;
  user: string;
  workdir: string;
  /** A shell line, as the non-interactive `cordon exec` takes it. */
  command: string;
  /** `-i`: the caller's stdin is the command's. */
  interactive: boolean;
  /** `-t`: a pseudo-terminal, with the caller's terminal in raw mode. */
  tty: boolean;
  signal: AbortSignal;
  /**
   * Receives what the command writes where cordon's own lines go, after it is written: its
   * stderr, and with `-t` everything (a pseudo-terminal has one output).
   */
  onSharedOutput?: ((chunk: Uint8Array) => void) | undefined;
}

/** The terminal type the command is told (a name of ours, never a value with escapes in it). */
function terminalType(env: NodeJS.ProcessEnv): string {
  const term = env["TERM"];
  return term && /^[A-Za-z0-9._+-]{1,64}$/.test(term) ? term : "xterm";
}

/**
 * `cordon exec -i/-t`: the process's own stdin, stdout and stderr attached to one command in the
 * sandbox, as `docker exec -i -t` attaches them. With `-t` the terminal is put in raw mode (keys,
 * Ctrl-C included, go to the command) and restored on every way out: the command's end, an error,
 * an interrupt, or `process.exit` (a second Ctrl-C of `withInterrupt`). Resizes are forwarded.
 * Returns the command's exit code.
 */
export async function runInteractiveCommand(options: InteractiveCommand): Promise<number> {
  const { stdin, stdout, stderr } = process;
  const raw = options.tty && stdin.isTTY;
  const restoreTerminal = (): void => {
    if (raw && stdin.isRaw) stdin.setRawMode(false);
  };
  // `process.exit` skips `finally`; an exit listener runs even then (synchronously, as needed).
  process.on("exit", restoreTerminal);
  let onResize: (() => void) | undefined;
  let session: Awaited<ReturnType<typeof startInteractiveExec>> | undefined;
  const onAbort = (): void => void session?.hangUp();
  // The terminal itself went away (a closed window): hang the command up too, then go.
  const onHangUp = (): void => {
    restoreTerminal();
    void (session?.hangUp() ?? Promise.resolve()).finally(() => process.exit(128 + 1));
  };
  process.once("SIGHUP", onHangUp);
  try {
    session = await startInteractiveExec(DockerEngine.fromEnv(options.env), {
      containerName: options.containerName,
      user: options.user,
      workingDir: options.workdir,
      cmd: ["/bin/sh", "-c", options.command],
      env: options.tty ? [`TERM=${terminalType(options.env)}`] : [],
      tty: options.tty,
      initialSize:
        options.tty && stdout.isTTY ? { rows: stdout.rows, columns: stdout.columns } : undefined,
      stdin: options.interactive ? stdin : undefined,
      onStdout: (chunk) => {
        stdout.write(chunk);
        if (options.tty) options.onSharedOutput?.(chunk);
      },
      onStderr: (chunk) => {
        stderr.write(chunk);
        options.onSharedOutput?.(chunk);
      },
    });
    if (raw) stdin.setRawMode(true);
    if (options.tty && stdout.isTTY) {
      const current = session;
      onResize = () => void current.resize({ rows: stdout.rows, columns: stdout.columns });
      stdout.on("resize", onResize);
      onResize();
    }
    options.signal.addEventListener("abort", onAbort, { once: true });
    if (options.signal.aborted) onAbort();
    const exitCode = await session.exitCode;
    // Cut off by a stop signal: the code of that signal, as the process exits with it.
    return options.signal.aborted ? exitCodeOfAbort(options.signal) : exitCode;
  } finally {
    options.signal.removeEventListener("abort", onAbort);
    process.off("SIGHUP", onHangUp);
    if (onResize) stdout.off("resize", onResize);
    restoreTerminal();
    process.off("exit", restoreTerminal);
    // Nothing reads stdin any more: it must not keep the process alive.
    if (options.interactive) stdin.pause();
  }
}
