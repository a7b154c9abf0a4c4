import { stripVTControlCharacters } from "node:util";

/**
 * The `tool-output` event: a running tool's output as it comes (an exec's stdout and stderr,
 * interleaved in arrival order), coalesced per call. Shown to people (the live line, `logs -f`,
 * `ps`); never sent to the model, whose result is the tool's own.
 */
export interface ToolOutputEvent {
  type: "tool-output";
  toolCallId: string;
  name: string;
  /**
   * Output since the previous event of this call, as the tool decoded it (control characters
   * included: renderers show them, never obey them). "" once the call's cap is spent.
   */
  text: string;
  /** Characters since the previous event that `text` leaves out (from its start): the caps. */
  omittedChars: number;
  /**
   * The last line of the output so far that has something in it, as a terminal would show it
   * (the part after a carriage return, terminal escapes removed), cut to `lastLineChars`.
   */
  lastLine: string;
}

/** How much a call's output events may carry, and how often they come. */
export interface ToolOutputLimits {
  /** Least time between two events of one call, in milliseconds. Default 250. */
  intervalMs: number;
  /** `text` of one event at most, in characters (the newest kept). Default 4096. */
  maxEventChars: number;
  /**
   * `text` of all of a call's events at most, in characters. Past it events carry only a changed
   * `lastLine`, at most one per `capIntervalMs`. Default 65 536.
   */
  maxCallChars: number;
  /** Least time between two events once `maxCallChars` is spent. Default 1000. */
  capIntervalMs: number;
}

export const defaultToolOutputLimits: ToolOutputLimits = {
  intervalMs: 250,
  maxEventChars: 4096,
  maxCallChars: 64 * 1024,
  capIntervalMs: 1000,
};

/** `ToolOutputEvent.lastLine` at most, in characters. */
export const lastLineChars = 200;
/** The unfinished line kept to find `lastLine` in, in characters (a line longer is cut). */
const partialLineChars = 4096;

/**
 * Coalesces one tool call's output into `tool-output` events: the first piece goes out at the
 * next tick, later ones at most every `intervalMs`, each bounded, and the whole call bounded; so
 * a command that floods its output costs the event stream (and the session's events file) a
 * fixed amount, while a quiet one printing a line every few seconds is shown line by line.
 */
export class ToolOutputStream {
  readonly #emit: (event: ToolOutputEvent) => void;
  readonly #limits: ToolOutputLimits;
  readonly #toolCallId: string;
  readonly #name: string;
  #pending = "";
  #omitted = 0;
  #sent = 0;
  #partial = "";
  #lastLine = "";
  #lastSentLine = "";
  #lastEmitAt = Number.NEGATIVE_INFINITY;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: {
    toolCallId: string;
    name: string;
    emit: (event: ToolOutputEvent) => void;
    limits?: Partial<ToolOutputLimits> | undefined;
  }) {
    this.#toolCallId = options.toolCallId;
    this.#name = options.name;
    this.#emit = options.emit;
    this.#limits = { ...defaultToolOutputLimits, ...options.limits };
  }

  /** Takes output as the tool decoded it. After `close` it is ignored. */
  readonly push = (text: string): void => {
    if (this.#closed || text === "") return;
    this.#trackLastLine(text);
    const room = Math.max(0, this.#limits.maxCallChars - this.#sent);
    const kept = this.#pending + text;
    const limit = Math.min(this.#limits.maxEventChars, room);
    if (kept.length > limit) {
      this.#omitted += kept.length - limit;
      this.#pending = limit === 0 ? "" : kept.slice(kept.length - limit);
    } else {
      this.#pending = kept;
    }
    this.#schedule();
  };

  /** Sends what is pending now and stops: called before the call's result is emitted. */
  close(): void {
    if (this.#closed) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#send();
    this.#closed = true;
  }

  #schedule(): void {
    if (this.#timer) return;
    const capped = this.#sent >= this.#limits.maxCallChars;
    const interval = capped ? this.#limits.capIntervalMs : this.#limits.intervalMs;
    const wait = Math.max(0, this.#lastEmitAt + interval - performance.now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#send();
    }, wait);
  }

  #send(): void {
    const changed = this.#lastLine !== this.#lastSentLine;
    if (this.#pending === "" && !changed) return;
    const event: ToolOutputEvent = {
      type: "tool-output",
      toolCallId: this.#toolCallId,
      name: this.#name,
      text: this.#pending,
      omittedChars: this.#omitted,
      lastLine: this.#lastLine,
    };
    this.#sent += this.#pending.length;
    this.#pending = "";
    this.#omitted = 0;
    this.#lastSentLine = this.#lastLine;
    this.#lastEmitAt = performance.now();
    this.#emit(event);
  }

  #trackLastLine(text: string): void {
    const combined = this.#partial + text;
    const [shown] = lastShownLines(combined, 1);
    if (shown !== undefined) this.#lastLine = shown;
    const partial = combined.slice(combined.lastIndexOf("\n") + 1);
    this.#partial = partial.length > partialLineChars ? partial.slice(-partialLineChars) : partial;
  }
}

/**
 * One line as a terminal leaves it: what follows its last carriage return (a progress bar
 * redraws the line that way), terminal escapes removed, trailing space trimmed, cut to
 * `lastLineChars`. "" when nothing visible is left.
 */
export function shownLine(line: string): string {
  const withoutEnd = line.endsWith("\r") ? line.slice(0, -1) : line;
  const afterReturn = withoutEnd.slice(withoutEnd.lastIndexOf("\r") + 1);
  const shown = stripVTControlCharacters(afterReturn).trimEnd();
  if (shown.trim() === "") return "";
  return shown.length > lastLineChars ? `${shown.slice(0, lastLineChars - 1)}…` : shown;
}

/** The last `count` lines of `text` that show something (see `shownLine`), oldest first. */
export function lastShownLines(text: string, count: number): string[] {
  const found: string[] = [];
  const lines = text.split("\n");
  for (let at = lines.length - 1; at >= 0 && found.length < count; at--) {
    const shown = shownLine(lines[at] ?? "");
    if (shown !== "") found.unshift(shown);
  }
  return found;
}
