/**
 * Head + tail truncation: the start of an output says what ran, the end says how it finished;
 * the middle is what a model can most afford to lose.
 */

export interface Truncated {
  text: string;
  /** Characters dropped from the middle (0 when nothing was dropped). */
  omitted: number;
}

/** Keeps at most `maxChars` characters: the first and last halves, with a marker between. */
export function truncateMiddle(text: string, maxChars: number): Truncated {
  if (text.length <= maxChars) return { text, omitted: 0 };
  const head = Math.ceil(maxChars / 2);
  const tail = maxChars - head;
  const cutHead = cutAtLine(text.slice(0, head), "end");
  const cutTail = cutAtLine(text.slice(text.length - tail), "start");
  const dropped = text.length - cutHead.length - cutTail.length;
  return {
    text: `${cutHead}\n[… ${dropped} characters omitted …]\n${cutTail}`,
    omitted: dropped,
  };
}

/** Trims a partial line at the cut, unless that would drop most of the kept text. */
function cutAtLine(text: string, side: "start" | "end"): string {
  if (side === "end") {
    const index = text.lastIndexOf("\n");
    return index > text.length / 2 ? text.slice(0, index) : text;
  }
  const index = text.indexOf("\n");
  return index !== -1 && index < text.length / 2 ? text.slice(index + 1) : text;
}

/**
 * Collects streamed text keeping only the first and last `maxChars / 2` characters, so an output
 * bomb costs bounded memory.
 */
export class HeadTailBuffer {
  #head = "";
  #tail = "";
  #total = 0;
  readonly #half: number;

  constructor(readonly maxChars: number) {
    this.#half = Math.floor(maxChars / 2);
  }

  append(text: string): void {
    this.#total += text.length;
    if (this.#head.length < this.#half) {
      const room = this.#half - this.#head.length;
      this.#head += text.slice(0, room);
      text = text.slice(room);
    }
    if (text === "") return;
    this.#tail = (this.#tail + text).slice(-(this.maxChars - this.#half));
  }

  get totalChars(): number {
    return this.#total;
  }

  get truncated(): boolean {
    return this.#total > this.#head.length + this.#tail.length;
  }

  result(): Truncated {
    if (!this.truncated) return { text: this.#head + this.#tail, omitted: 0 };
    const omitted = this.#total - this.#head.length - this.#tail.length;
    return { text: `${this.#head}\n[… ${omitted} characters omitted …]\n${this.#tail}`, omitted };
  }
}
