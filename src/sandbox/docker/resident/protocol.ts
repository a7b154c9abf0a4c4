/**
 * The frames cordon and its resident executor (executor.c) exchange over the executor's stdin and
 * stdout: type (1 byte), id (u32 big-endian), payload length (u32 big-endian), payload. The id
 * names one call; the executor's own frames use id 0. A channel (a connection accepted on a
 * forwarded port, or made on cordon's request) has an id the executor made, with `channelIdBit`
 * set; cordon's ids never have it.
 */

/** Set in every channel id (the executor's); cordon's call and listener ids stay below it. */
export const channelIdBit = 0x80000000;

/** What the executor says first; a different version is a different protocol (fall back). */
export const protocolGreeting = "cordon-executor 6";

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
  /**
   * Run a command the way the exec wrapper's `run` mode does (`ExecRequest.wrapped`): u32 flags
   * (1 = stdin attached), then run id, cwd, root, state directory and command (C strings).
   */
  run: "C",
  /** Kill the process tree of a command started by `run`: its run id. Unhandled if unknown. */
  kill: "K",
  /**
   * Listen on 127.0.0.1 in the sandbox: u32 port (0 = any free one). Its id names the listener in
   * the channels it opens. Answered by exit (the bound port as the status) or failed (a reason;
   * exactly `portInUse` when another socket holds the port).
   */
  listen: "L",
  /** Stop listening (the listener's id); channels it opened go on. */
  unlisten: "Q",
  /** Bytes for a channel's connection. */
  channelData: "B",
  /** No more bytes for the channel's connection: it is shut down for writing (half close). */
  channelEnd: "Z",
  /** Drop the channel's connection at once: the process in the sandbox sees a reset (RST). */
  channelReset: "Y",
  /**
   * Connect to 127.0.0.1:PORT in the sandbox (`cordon port-forward`): u32 port. Answered by a
   * channel open whose payload is this request's id, or failed (a reason, e.g. "Connection refused").
   */
  connect: "N",
  /**
   * How busy the sandbox is, read from /proc (`SandboxQuiet`): answered with stdout
   * "OTHERS LAST BUSY" and exit 0, or unhandled when /proc cannot be read.
   */
  quiet: "G",
} as const;

/** The reason of a failed listen when the port is held by another socket. */
export const portInUse = "in use";

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
  /** A connection accepted on a forwarded port: a new channel id, payload u32 listener id. */
  channelOpen: "N",
  /** Bytes from a channel's connection (acknowledged with `request.ack`, per channel). */
  channelData: "B",
  /** The connection's side ended (half close). */
  channelEnd: "Z",
  /** The connection failed or was reset. */
  channelReset: "Y",
  /** u32: bytes of the channel cordon sent that are written into the connection. */
  channelAck: "A",
} as const;

export interface Frame {
  type: string;
  id: number;
  /**
   * The payload in the pieces it arrived in: views of the stream's chunks, never copies, so a
   * 10 MiB read is copied once (by whoever needs it whole), not once per layer. `payloadOf`
   * joins them.
   */
  parts: Buffer[];
  /** The payload's length in bytes. */
  length: number;
}

/** A frame's payload as one buffer (a copy only when it arrived in several pieces). */
export function payloadOf(frame: Frame): Buffer {
  return frame.parts.length === 1 && frame.parts[0]
    ? frame.parts[0]
    : Buffer.concat(frame.parts, frame.length);
}

/** One frame as its pieces: the header, then the payload parts as they are (not copied). */
export function frameParts(type: string, id: number, ...payload: Uint8Array[]): Uint8Array[] {
  const length = payload.reduce((sum, part) => sum + part.byteLength, 0);
  const header = Buffer.alloc(headerBytes);
  header.write(type, 0, "latin1");
  header.writeUInt32BE(id, 1);
  header.writeUInt32BE(length, 5);
  return [header, ...payload.filter((part) => part.byteLength > 0)];
}

/** One frame's bytes. */
export function encodeFrame(type: string, id: number, ...payload: Uint8Array[]): Buffer {
  return Buffer.concat(frameParts(type, id, ...payload));
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
 * Cuts a byte stream into frames. Only a header is ever kept across chunks; a payload is the
 * views of the chunks it came in (see `Frame.parts`).
 */
export class FrameReader {
  readonly #header = Buffer.alloc(headerBytes);
  #headerFilled = 0;
  /** The frame whose payload is arriving, and how many of its bytes are still to come. */
  #current: Frame | undefined;
  #remaining = 0;

  *push(chunk: Uint8Array): Generator<Frame> {
    const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let at = 0;
    for (;;) {
      if (!this.#current) {
        if (at >= bytes.byteLength) return;
        const take = Math.min(headerBytes - this.#headerFilled, bytes.byteLength - at);
        bytes.copy(this.#header, this.#headerFilled, at, at + take);
        this.#headerFilled += take;
        at += take;
        if (this.#headerFilled < headerBytes) return;
        this.#headerFilled = 0;
        const length = this.#header.readUInt32BE(5);
        this.#current = {
          type: String.fromCharCode(this.#header[0] ?? 0),
          id: this.#header.readUInt32BE(1),
          parts: [],
          length,
        };
        this.#remaining = length;
      }
      const take = Math.min(this.#remaining, bytes.byteLength - at);
      if (take > 0) {
        this.#current.parts.push(bytes.subarray(at, at + take));
        at += take;
        this.#remaining -= take;
      }
      if (this.#remaining > 0) return;
      const frame = this.#current;
      this.#current = undefined;
      yield frame;
    }
  }
}
