import { Writable } from "node:stream";

import type { OutputHandler } from "../../shell/exec-transport.js";

/** Receives one demultiplexed payload; a returned promise holds back the stream until it settles. */
export type { OutputHandler };

const headerBytes = 8;

/**
 * Splits Docker's multiplexed exec stream (8-byte headers: stream type, 3 zero bytes, payload
 * length big-endian) into stdout and stderr payloads. A writable, so a slow handler (a full
 * output log) pushes back on the socket instead of buffering in memory.
 *
 * A payload is handed on as the pieces of it each socket chunk holds, as views of that chunk:
 * Docker's frames (32 KiB) straddle the socket's chunks (64 KiB), and joining them again cost a
 * copy of every byte and most of the garbage collection of a 10 MiB read (issue 17). Frame
 * boundaries mean nothing to a byte stream; only the 8-byte header is ever kept across chunks.
 */
export class DemuxStream extends Writable {
  readonly #header = Buffer.alloc(headerBytes);
  #headerFilled = 0;
  /** Payload bytes of the current frame still to come, and whose they are (1 stdout, 2 stderr). */
  #remaining = 0;
  #type = 0;

  constructor(private readonly handler: OutputHandler) {
    super();
  }

  override _write(
    chunk: Buffer,
    _encoding: BufferEncoding,
    callback: (error?: Error | null) => void,
  ): void {
    const fail = (error: unknown): void =>
      callback(error instanceof Error ? error : new Error(String(error)));
    try {
      // Synchronous while the handler is (the resident executor's is): a promise and a few
      // microtasks per socket chunk were a visible part of a 10 MiB read's CPU time.
      const pending = this.#consume(chunk, 0);
      if (pending) pending.then(() => callback(), fail);
      else callback();
    } catch (error) {
      fail(error);
    }
  }

  /** Consumes `chunk` from `at`; a promise when a handler made it wait, else undefined. */
  #consume(chunk: Buffer, at: number): Promise<void> | undefined {
    while (at < chunk.byteLength) {
      if (this.#remaining === 0) {
        const take = Math.min(headerBytes - this.#headerFilled, chunk.byteLength - at);
        chunk.copy(this.#header, this.#headerFilled, at, at + take);
        this.#headerFilled += take;
        at += take;
        if (this.#headerFilled < headerBytes) return undefined;
        this.#headerFilled = 0;
        this.#type = this.#header[0] ?? 0;
        this.#remaining = this.#header.readUInt32BE(4);
        continue;
      }
      const take = Math.min(this.#remaining, chunk.byteLength - at);
      const payload = chunk.subarray(at, at + take);
      at += take;
      this.#remaining -= take;
      // Type 0 is stdin echo (never sent without a TTY); 1 stdout; 2 stderr.
      if (this.#type !== 1 && this.#type !== 2) continue;
      const handled = this.handler(this.#type === 1 ? "stdout" : "stderr", payload);
      if (handled instanceof Promise) {
        const next = at;
        return handled.then(() => this.#consume(chunk, next));
      }
    }
    return undefined;
  }
}
