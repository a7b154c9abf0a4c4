/**
 * The frames cordon and its resident executor (executor.c) exchange over the executor's stdin and
 * stdout: type (1 byte), id (u32 big-endian), payload length (u32 big-endian), payload. The id
 * names one call; the executor's own frames use id 0.
 */

/** What the executor says first; a different version is a different protocol (fall back). */
export const protocolGreeting = "cordon-executor 2";

export const headerBytes = 9;

/** cordon → executor. */
export const request = {
  /** Start a process: u32 flags (1 = stdin attached), u32 argc, u32 envc, argv, env, cwd (C strings). */
  spawn: "S",
  /** Bytes for a process's stdin; an empty payload is end-of-file. */
  stdin: "I",
  /** u32: output bytes of the call consumed, so the executor may send more (per-call backpressure). */
  ack: "A",
  /** Stop relaying a call's output and close its pipes; the process keeps running. */
  detach: "D",
  /** Fast read: u64 max bytes, path. */
  read: "R",
  /** Fast write: u32 mode, u32 create-parents, u32 path length, path, content. */
  write: "W",
  /** Fast stat: path. */
  stat: "T",
  /** Answered at once with a pong: the executor is alive and not stopped. */
  ping: "P",
} as const;

/** executor → cordon. */
export const response = {
  /** The greeting (`protocolGreeting`); its id is the executor's pid in the container. */
  hello: "H",
  pong: "P",
  stdout: "O",
  stderr: "E",
  /** i32 exit status (128 + N after signal N). */
  exit: "X",
  /** The process could not be started: a reason. */
  failed: "F",
  /** A fast path did not handle the case: run the file script. */
  unhandled: "U",
} as const;

export interface Frame {
  type: string;
  id: number;
  payload: Buffer;
}

/** One frame's bytes. */
export function encodeFrame(type: string, id: number, ...payload: Uint8Array[]): Buffer {
  const length = payload.reduce((sum, part) => sum + part.byteLength, 0);
  const header = Buffer.alloc(headerBytes);
  header.write(type, 0, "latin1");
  header.writeUInt32BE(id, 1);
  header.writeUInt32BE(length, 5);
  return Buffer.concat([header, ...payload], headerBytes + length);
}

export function u32(value: number): Buffer {
  const buffer = Buffer.alloc(4);
  buffer.writeUInt32BE(value >>> 0);
  return buffer;
}

export function u64(value: number): Buffer {
  const buffer = Buffer.alloc(8);
  buffer.writeBigUInt64BE(BigInt(value));
  return buffer;
}

/** Strings as NUL-terminated bytes. */
export function cStrings(...values: string[]): Buffer {
  return Buffer.concat(values.map((value) => Buffer.from(`${value}\0`, "utf8")));
}

/**
 * Cuts a byte stream into frames. Chunks are kept as they come and joined once per frame, so a
 * large frame arriving in many pieces is copied once, not once per piece.
 */
export class FrameReader {
  #chunks: Buffer[] = [];
  #buffered = 0;

  *push(chunk: Uint8Array): Generator<Frame> {
    this.#chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    this.#buffered += chunk.byteLength;
    for (;;) {
      if (this.#buffered < headerBytes) return;
      const head = this.#take(headerBytes, false);
      const length = head.readUInt32BE(5);
      if (this.#buffered < headerBytes + length) return;
      const bytes = this.#take(headerBytes + length, true);
      yield {
        type: String.fromCharCode(bytes[0] ?? 0),
        id: bytes.readUInt32BE(1),
        payload: bytes.subarray(headerBytes),
      };
    }
  }

  /** The first `count` buffered bytes as one buffer; removed from the buffer when `consume`. */
  #take(count: number, consume: boolean): Buffer {
    const first = this.#chunks[0];
    let joined: Buffer;
    if (first && first.byteLength >= count) {
      joined = first.subarray(0, count);
    } else {
      const all = Buffer.concat(this.#chunks, this.#buffered);
      this.#chunks = [all];
      joined = all.subarray(0, count);
    }
    if (consume) {
      const head = this.#chunks[0] ?? Buffer.alloc(0);
      const rest = head.subarray(count);
      this.#chunks = rest.byteLength > 0 ? [rest, ...this.#chunks.slice(1)] : this.#chunks.slice(1);
      this.#buffered -= count;
    }
    return joined;
  }
}
