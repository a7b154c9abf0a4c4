import { colorEnabled, painter, type Paint } from "./colors.js";

/** One output stream as the CLI judges it; `process.stdout` and `process.stderr` are ones. */
export interface OutputStream {
  isTTY?: boolean | undefined;
  /** Whether the terminal shows colours (Node's `tty.WriteStream.hasColors`). */
  hasColors?: (() => boolean) | undefined;
  /** Its width in columns, read when needed (a terminal can be resized). */
  columns?: number | undefined;
  /** Its height in rows, read when needed. */
  rows?: number | undefined;
}

/** See `CliContext.terminal`. */
export interface TerminalOutput {
  stdout: boolean;
  stderr: boolean;
  /** Columns of the terminal, when known. */
  columns: () => number | undefined;
  /** Rows of the terminal, when known (a view redrawn in place must fit them). */
  rows: () => number | undefined;
}

/** What the CLI decided once about its two output streams. */
export interface OutputDecision {
  /** Which stream takes cursor codes, and the width: see `CliContext.terminal`. */
  terminal: TerminalOutput | undefined;
  /** Colour for each stream: see `CliContext.paint`. */
  paint: { stdout: Paint; stderr: Paint };
}

/**
 * The one place that decides, for stdout and stderr, whether each is a terminal that takes cursor
 * codes (a live line, a table fitted to its width) and whether it gets colour. No streams (tests
 * capturing output): neither, as into a pipe. `TERM=dumb` is a terminal without cursor codes: it
 * gets the lines a pipe gets (and Node reports no colours for it).
 */
export function decideOutput(
  streams: { stdout: OutputStream; stderr: OutputStream } | undefined,
  env: NodeJS.ProcessEnv,
): OutputDecision {
  const stdout = streams?.stdout ?? {};
  const stderr = streams?.stderr ?? {};
  const paint = {
    stdout: painter(colorEnabled(stdout, env)),
    stderr: painter(colorEnabled(stderr, env)),
  };
  if (streams === undefined || env["TERM"] === "dumb") return { terminal: undefined, paint };
  return {
    paint,
    terminal: {
      stdout: stdout.isTTY === true,
      stderr: stderr.isTTY === true,
      // Read live: a resized terminal's next frame fits its new width.
      columns: () => stderr.columns ?? stdout.columns,
      rows: () => stdout.rows ?? stderr.rows,
    },
  };
}
