import { createInterface } from "node:readline";

import { z } from "zod";

import type { UserContentBlock } from "../runner/index.js";

/**
 * `cordon run --input-format stream-json`: user messages as JSON lines on stdin, in Claude
 * Code's shape, read while the run goes on:
 *
 *     {"type":"user","message":{"role":"user","content":"also update the changelog"}}
 *
 * `content` is a string or a list of `text` blocks and base64 `image` blocks. A line that is not
 * such a message is reported (one line, naming the line number and why) and skipped; the lines
 * around it are kept. Blank lines are ignored.
 */

const textBlock = z.strictObject({ type: z.literal("text"), text: z.string() });
const imageBlock = z.object({
  type: z.literal("image"),
  source: z.object({
    type: z.literal("base64"),
    media_type: z.string().regex(/^image\/[a-z0-9.+-]+$/),
    data: z.string(),
  }),
});
const userLine = z.object({
  type: z.literal("user"),
  message: z.object({
    role: z.literal("user"),
    content: z.union([z.string(), z.array(z.union([textBlock, imageBlock])).min(1)]),
  }),
});

/** One line as a user message, or why it is not one. */
export function parseUserLine(line: string): UserContentBlock[] | { error: string } {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { error: "not JSON" };
  }
  const parsed = userLine.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? `${issue.path.join(".")}: ` : "";
    return {
      error: `not a user message (${where}${issue?.message ?? "unexpected shape"}); expected {"type":"user","message":{"role":"user","content":"…"}}`,
    };
  }
  const content = parsed.data.message.content;
  if (typeof content === "string") return [{ type: "text", text: content }];
  return content.map((block) =>
    block.type === "text"
      ? { type: "text", text: block.text }
      : { type: "image", mediaType: block.source.media_type, dataBase64: block.source.data },
  );
}

/**
 * One typed line as a user message (`cordon run -i`): the text as typed, surrounding space
 * trimmed; nothing to parse, so never an error.
 */
export function parseTypedLine(line: string): UserContentBlock[] {
  return [{ type: "text", text: line.trim() }];
}

/**
 * The messages of a stream-json input (or, with `parseTypedLine`, of lines typed at a
 * terminal), as they arrive. While a run goes, `deliverTo` hands each
 * new message straight to the run (its steering queue); between runs they wait here for `next`.
 */
export class StreamJsonInput {
  readonly #pending: UserContentBlock[][] = [];
  #ended = false;
  #wake: (() => void) | undefined;
  #sink: ((message: UserContentBlock[]) => void) | undefined;

  constructor(
    stream: NodeJS.ReadableStream,
    onError: (message: string) => void,
    parse: (line: string) => UserContentBlock[] | { error: string } = parseUserLine,
  ) {
    const lines = createInterface({ input: stream, crlfDelay: Infinity });
    let number = 0;
    lines.on("line", (line) => {
      number += 1;
      if (line.trim() === "") return;
      const message = parse(line);
      if ("error" in message) {
        onError(`stdin line ${number} skipped: ${message.error}`);
        return;
      }
      if (this.#sink) this.#sink(message);
      else this.#pending.push(message);
      this.#wakeUp();
    });
    lines.on("close", () => {
      this.#ended = true;
      this.#wakeUp();
    });
  }

  /**
   * Sends each message to `sink` (a running run) from now on, those waiting here first; none:
   * keep them for `next`.
   */
  deliverTo(sink: ((message: UserContentBlock[]) => void) | undefined): void {
    this.#sink = sink;
    if (sink) for (const message of this.#pending.splice(0)) sink(message);
  }

  /** The next message, waiting for it; undefined once stdin has ended and none is left. */
  async next(): Promise<UserContentBlock[] | undefined> {
    for (;;) {
      const message = this.#pending.shift();
      if (message) return message;
      if (this.#ended) return undefined;
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }

  #wakeUp(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}
