import type { UserContentBlock } from "../model/index.js";
import type { MessageSource } from "./run-io.js";

/**
 * Messages an embedder hands to a running run: a `MessageSource` (run-io.ts) filled by `push`.
 * As `steering` they are delivered between tool calls (the remaining calls of that turn are
 * skipped); as `followUps` they wait until the model would stop.
 */
export class MessageQueue implements MessageSource {
  readonly #items: UserContentBlock[][] = [];

  /** Queues a message: plain text or content blocks. */
  push(message: string | UserContentBlock[]): void {
    this.#items.push(typeof message === "string" ? [{ type: "text", text: message }] : message);
  }

  get size(): number {
    return this.#items.length;
  }

  /** Takes every queued message, oldest first. */
  drain(): UserContentBlock[][] {
    return this.#items.splice(0, this.#items.length);
  }
}
