import { Duplex } from "node:stream";

import { request, u32 } from "./protocol.js";

/**
 * Channel bytes in flight each way before the other side acknowledges them (the executor's
 * CHANNEL_WINDOW): a slow reader holds back only its own channel, never the stream.
 */
export const channelWindowBytes = 256 * 1024;
/** Bytes a channel sends in one frame, so no frame holds the shared stream for long. */
const frameBytes = 64 * 1024;

/** How a channel reaches the executor: one frame out on the shared stream. */
export type SendFrame = (type: string, id: number, ...payload: Uint8Array[]) => void;

/**
 * One connection accepted on a forwarded port inside the sandbox, as a Node duplex on cordon's
 * side (what `net.Socket` is to a TCP connection): writes become channel data frames, the
 * executor's data frames are pushed as they come. Backpressure both ways: a write waits while
 * more than the window is unacknowledged by the executor, and cordon acknowledges the executor's
 * bytes only once they are read, so the executor stops reading the connection when this side is
 * slow. `end()` is a half close, as on a socket.
 */
export class ForwardedChannel extends Duplex {
  /** The sandbox address a connection came from is loopback; there is no other to report. */
  readonly remoteAddress = "127.0.0.1";
  readonly #id: number;
  readonly #send: SendFrame;
  #unacked = 0;
  /** A write not yet all sent: the rest goes as acknowledgements make room in the window. */
  #pending: { chunk: Buffer; offset: number; done: () => void } | undefined;
  /** Bytes pushed while the reader was full: acknowledged when it asks for more. */
  #owedAck = 0;
  #readerFull = false;
  #sentEnd = false;
  #gotEnd = false;

  constructor(id: number, send: SendFrame) {
    super({ allowHalfOpen: true });
    this.#id = id;
    this.#send = send;
  }

  get id(): number {
    return this.#id;
  }

  /** The executor's data frame for this channel. */
  receive(parts: readonly Buffer[], length: number): void {
    if (this.destroyed || this.#gotEnd) return;
    let room = true;
    for (const part of parts) room = this.push(part) && room;
    if (room && !this.#readerFull) this.#send(request.ack, this.#id, u32(length));
    else {
      this.#readerFull = true;
      this.#owedAck += length;
    }
  }

  /** The executor wrote `bytes` of ours into the connection. */
  acknowledged(bytes: number): void {
    this.#unacked = Math.max(0, this.#unacked - bytes);
    this.#sendPending();
  }

  /** The connection's side ended: no more bytes come. */
  receivedEnd(): void {
    if (this.#gotEnd) return;
    this.#gotEnd = true;
    this.push(null);
  }

  /** The connection failed in the sandbox, or the executor went away. */
  reset(why: string): void {
    this.#gotEnd = this.#sentEnd = true;
    this.destroy(Object.assign(new Error(why), { code: "ECONNRESET" }));
  }

  override _read(): void {
    if (!this.#readerFull) return;
    this.#readerFull = false;
    const owed = this.#owedAck;
    this.#owedAck = 0;
    if (owed > 0) this.#send(request.ack, this.#id, u32(owed));
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error) => void): void {
    this.#pending = { chunk, offset: 0, done: () => done() };
    this.#sendPending();
  }

  /**
   * Sends what the window has room for: never more than the window unacknowledged, whatever the
   * size of one write (the executor resets a channel sent far past it, as a broken peer).
   */
  #sendPending(): void {
    const pending = this.#pending;
    if (!pending) return;
    while (pending.offset < pending.chunk.byteLength && this.#unacked < channelWindowBytes) {
      const size = Math.min(frameBytes, channelWindowBytes - this.#unacked);
      const piece = pending.chunk.subarray(pending.offset, pending.offset + size);
      this.#send(request.channelData, this.#id, piece);
      this.#unacked += piece.byteLength;
      pending.offset += piece.byteLength;
    }
    if (pending.offset < pending.chunk.byteLength) return;
    this.#pending = undefined;
    pending.done();
  }

  override _final(done: (error?: Error) => void): void {
    this.#sentEnd = true;
    this.#send(request.channelEnd, this.#id);
    done();
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    // Ended both ways, the executor has let the connection go too; otherwise it is dropped.
    if (!(this.#sentEnd && this.#gotEnd)) this.#send(request.channelReset, this.#id);
    this.#sentEnd = this.#gotEnd = true;
    this.#pending = undefined;
    done(error);
  }

  // What Node's HTTP server calls on a socket; a channel has no timers or TCP options of its own.
  setTimeout(): this {
    return this;
  }
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
}
