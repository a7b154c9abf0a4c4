import type { CliContext } from "../context.js";

/**
 * The line that shows what a running tool prints now (its last output line, from `tool-output`
 * events). On a terminal it is redrawn in place and taken away before anything else is written;
 * anywhere else (a pipe, a CI log) it is a plain line now and then, never a cursor code.
 */
export interface LiveLine {
  /** Shows `line` (already printable: one line, no control characters) as the current output. */
  show(line: string): void;
  /** Takes the shown line away (a terminal) or forgets a pending one, before other output. */
  clear(): void;
}

/** Where the line goes and what the output is. */
export interface LiveLineTarget {
  write: (text: string) => void;
  /** A terminal that takes cursor codes (not TERM=dumb). */
  terminal: boolean;
  /** The terminal's width in columns (the line is cut to fit, so it never wraps). */
  columns?: (() => number | undefined) | undefined;
}

const prefix = "  │ ";
/** Not a terminal: at most one line this often, and none before a command has run this long. */
export const plainLineIntervalMs = 5_000;
const eraseLine = "\r\u001b[2K";

export function createLiveLine(target: LiveLineTarget): LiveLine {
  return target.terminal
    ? terminalLiveLine(target.write, target.columns ?? (() => undefined))
    : plainLiveLine(target.write);
}

/** Redrawn in place with a carriage return and erase-line; cut to the width so it never wraps. */
export function terminalLiveLine(
  write: (text: string) => void,
  columns: () => number | undefined,
): LiveLine {
  let shown: string | undefined;
  return {
    show(line) {
      if (line === shown) return;
      // A pseudo-terminal nobody sized says 0 columns: take the usual 80.
      const width = Math.max(20, (columns() || 80) - 1);
      const full = `${prefix}${line}`;
      const fitted = full.length > width ? `${full.slice(0, width - 1)}…` : full;
      write(`${eraseLine}${fitted}`);
      shown = line;
    },
    clear() {
      if (shown !== undefined) write(eraseLine);
      shown = undefined;
    },
  };
}

/**
 * A plain line at most every `intervalMs`, and only once the command has run that long since the
 * last line written (so a quick command adds nothing); a changed line waits for its turn on a
 * timer that never keeps the process alive.
 */
export function plainLiveLine(
  write: (text: string) => void,
  options: { intervalMs?: number; now?: () => number } = {},
): LiveLine {
  const intervalMs = options.intervalMs ?? plainLineIntervalMs;
  const now = options.now ?? (() => performance.now());
  let since = now();
  let printed = "";
  let pending: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  const print = (): void => {
    timer = undefined;
    if (pending === undefined || pending === printed) return;
    write(`${prefix}${pending}\n`);
    printed = pending;
    pending = undefined;
    since = now();
  };
  return {
    show(line) {
      pending = line;
      if (timer) return;
      const wait = since + intervalMs - now();
      if (wait <= 0) return print();
      timer = setTimeout(print, wait);
      timer.unref();
    },
    clear() {
      if (timer) clearTimeout(timer);
      timer = undefined;
      pending = undefined;
      printed = "";
      since = now();
    },
  };
}

/**
 * The live line of a command's output `stream`: in place when it is a terminal, plain lines
 * otherwise, or when `plain` (a person typing there: `run -i`, whose echo a redraw would erase).
 */
export function liveLineOf(
  context: Pick<CliContext, "stdout" | "stderr" | "terminal">,
  stream: "stdout" | "stderr",
  options: { plain?: boolean | undefined } = {},
): LiveLine {
  return createLiveLine({
    write: context[stream],
    terminal: !options.plain && context.terminal?.[stream] === true,
    columns: context.terminal?.columns,
  });
}
