/**
 * A file's content as it streams out of the container: the size line first, then the bytes go
 * straight into one buffer of that size, so a large file is held once, not once in pieces and
 * again joined. A file that grew while being read spills into extra pieces up to the limit.
 */
export class SizedContent {
  #header: Buffer | undefined = Buffer.alloc(0);
  #buffer: Buffer | undefined;
  #length = 0;
  readonly #extra: Buffer[] = [];
  overflowed = false;

  constructor(private readonly max: number) {}

  push(chunk: Uint8Array): void {
    let data = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (this.#header) {
      const joined = Buffer.concat([this.#header, data]);
      const newline = joined.indexOf(0x0a);
      if (newline < 0) {
        this.#header = joined;
        return;
      }
      const size = Math.min(Number(joined.subarray(0, newline).toString("ascii")) || 0, this.max);
      this.#buffer = Buffer.alloc(size);
      this.#header = undefined;
      data = joined.subarray(newline + 1);
    }
    const buffer = this.#buffer;
    if (!buffer) return;
    const room = buffer.byteLength - this.#length;
    const fits = Math.min(room, data.byteLength);
    data.copy(buffer, this.#length, 0, fits);
    this.#length += fits;
    if (fits < data.byteLength) {
      this.#extra.push(Buffer.from(data.subarray(fits)));
      const total = this.#length + this.#extra.reduce((sum, piece) => sum + piece.byteLength, 0);
      if (total > this.max) this.overflowed = true;
    }
  }

  bytes(): Uint8Array {
    const buffer = this.#buffer ?? Buffer.alloc(0);
    const head = buffer.subarray(0, this.#length);
    return this.#extra.length === 0 ? head : Buffer.concat([head, ...this.#extra]);
  }
}
