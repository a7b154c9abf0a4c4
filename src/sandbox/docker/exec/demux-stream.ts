import { Writable } from "node:stream";

import type { OutputHandler } from "../../shell/exec-transport.js";

/** Receives one demultiplexed payload; a returned promise holds back the stream until it settles. */
export type { OutputHandler };

const headerBytes = 8;

/**
 * Splits Docker's multiplexed exec stream (8-byte headers: stream type, 3 zero bytes, payload
 * length big-endian) into stdout and stderr payloads. A writable, so a slow handler (a full
 * output log) pushes back on the socket instead of buffering in memory.
 */
export class DemuxStream extends Writable {
  #pending: Buffer = Buffer.alloc(0);

  constructor(private readonly handler: OutputHandler) {
    super();
  }

  override _write(
    chunk: Buffer,
    _encoding: BufferEncoding,
    callback: (error?: Error | null) => void,
  ): void {
    this.#consume(chunk).then(
      () => callback(),
      (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
    );
  }

  override _final(callback: (error?: Error | null) => void): void {
    // A truncated frame at the end means the connection was cut mid-payload; deliver what came.
    if (this.#pending.byteLength > headerBytes) {
      const stream = this.#pending[0] === 2 ? "stderr" : "stdout";
      Promise.resolve(this.handler(stream, this.#pending.subarray(headerBytes))).then(
        () => callback(),
        (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
      );
      return;
    }
    callback();
  }

  async #consume(chunk: Buffer): Promise<void> {
    let data = this.#pending.byteLength === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    while (data.byteLength >= headerBytes) {
      const length = data.readUInt32BE(4);
      if (data.byteLength < headerBytes + length) break;
      const type = data[0];
      const payload = data.subarray(headerBytes, headerBytes + length);
      data = data.subarray(headerBytes + length);
      // Type 0 is stdin echo (never sent without a TTY); 1 stdout; 2 stderr.
      if (type === 1 || type === 2) await this.handler(type === 1 ? "stdout" : "stderr", payload);
    }
    // Copy the remainder so the large chunk it came from is not kept alive.
    this.#pending = data.byteLength === 0 ? Buffer.alloc(0) : Buffer.from(data);
  }
}
