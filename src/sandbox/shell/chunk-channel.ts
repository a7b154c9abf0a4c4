/**
 * A one-slot async queue: `write` resolves once the reader has taken the chunk, so a producer
 * (output being saved to a log) is held back by a slow consumer (the exec's stdin) instead of
 * piling chunks up in memory.
 */
export class ChunkChannel implements AsyncIterable<Uint8Array> {
  #slot: { chunk: Uint8Array; taken: () => void } | undefined;
  #closed = false;
  #wake: (() => void) | undefined;

  write(chunk: Uint8Array): Promise<void> {
    if (this.#closed) return Promise.reject(new Error("channel closed"));
    return new Promise<void>((resolve) => {
      this.#slot = { chunk, taken: resolve };
      this.#wake?.();
    });
  }

  /** No more chunks; a write still waiting is released (a reader that went away must not hang it). */
  close(): void {
    this.#closed = true;
    const slot = this.#slot;
    this.#slot = undefined;
    slot?.taken();
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    for (;;) {
      const slot = this.#slot;
      if (slot) {
        this.#slot = undefined;
        yield slot.chunk;
        slot.taken();
        continue;
      }
      if (this.#closed) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }
}
