/**
 * Output of one command, captured while it streams: each stream keeps at most `maxBytes` in
 * memory (its head and its tail), and the moment either stream overflows, everything (what was
 * kept so far, then every later chunk, both streams in arrival order) goes to a log the backend
 * opens inside the sandbox. Memory stays bounded whatever the command prints.
 */

/** Where the full output goes once a stream overflows. The backend owns the file. */
export interface OutputLog {
  /** Sandbox path of the log. */
  readonly path: string;
  /** Resolves when the log can take more (backpressure reaches the command's output). */
  write(chunk: Uint8Array): Promise<void>;
  /** Flushes and closes; resolves to false when the log could not be saved. */
  close(): Promise<boolean>;
}

export interface OutputCaptureOptions {
  /** Bytes kept in memory per stream. */
  maxBytes: number;
  /** Opens the full-output log; called at most once, on the first overflow. */
  openLog: () => Promise<OutputLog>;
  /** Bytes saved to the log at most; a flood beyond it is noted at the end of the log. */
  maxLogBytes?: number | undefined;
  onStdout?: ((chunk: Uint8Array) => void) | undefined;
  onStderr?: ((chunk: Uint8Array) => void) | undefined;
}

export interface CapturedOutput {
  stdout: string;
  stderr: string;
  truncated: boolean;
  /** Set when truncated and the log was saved. */
  fullOutputPath?: string | undefined;
}

export type StreamName = "stdout" | "stderr";

/**
 * A full-output log keeps this much at most. Logs live on the sandbox's /tmp (a tmpfs of a few
 * hundred MB), and a model reads them in pages: more than this would only crowd out real work.
 */
export const defaultMaxLogBytes = 16 * 1024 * 1024;
/** Full-output logs kept per sandbox; older ones are removed when a new one is opened. */
export const keptLogs = 8;
const encoder = new TextEncoder();

/** One stream's head and tail, at most `maxBytes` together. */
export class HeadTailBytes {
  readonly #headLimit: number;
  readonly #tailLimit: number;
  readonly #head: Uint8Array[] = [];
  #headBytes = 0;
  #tail: Uint8Array[] = [];
  #tailBytes = 0;
  #total = 0;

  constructor(readonly maxBytes: number) {
    this.#headLimit = Math.ceil(maxBytes / 2);
    this.#tailLimit = maxBytes - this.#headLimit;
  }

  get totalBytes(): number {
    return this.#total;
  }

  get truncated(): boolean {
    return this.#total > this.maxBytes;
  }

  push(chunk: Uint8Array): void {
    this.#total += chunk.byteLength;
    let rest = chunk;
    if (this.#headBytes < this.#headLimit) {
      const take = Math.min(this.#headLimit - this.#headBytes, rest.byteLength);
      this.#head.push(rest.subarray(0, take));
      this.#headBytes += take;
      rest = rest.subarray(take);
    }
    if (rest.byteLength === 0 || this.#tailLimit === 0) return;
    this.#tail.push(rest);
    this.#tailBytes += rest.byteLength;
    while (this.#tailBytes > this.#tailLimit) {
      const first = this.#tail[0];
      if (!first) break;
      const excess = this.#tailBytes - this.#tailLimit;
      if (first.byteLength <= excess) {
        this.#tail.shift();
        this.#tailBytes -= first.byteLength;
      } else {
        // Copy, so the dropped part of a large chunk can be collected.
        this.#tail[0] = first.slice(excess);
        this.#tailBytes -= excess;
      }
    }
  }

  /** The kept text: all of it, or head + a marker naming the dropped bytes + tail. */
  text(): string {
    const head = concat(this.#head, this.#headBytes);
    const tail = concat(this.#tail, this.#tailBytes);
    if (!this.truncated) return decode(concat([head, tail], head.byteLength + tail.byteLength));
    const keptHead = head.subarray(0, completeUtf8Length(head));
    const keptTail = tail.subarray(utf8StartOffset(tail));
    const omitted = this.#total - keptHead.byteLength - keptTail.byteLength;
    return `${decode(keptHead)}\n[… ${omitted} bytes omitted …]\n${decode(keptTail)}`;
  }
}

/** Both streams of one command, with the overflow log. */
export class OutputCapture {
  readonly #streams: Record<StreamName, HeadTailBytes>;
  readonly #options: OutputCaptureOptions;
  readonly #maxLogBytes: number;
  /** Both streams in arrival order, until the first overflow (then the log has them). */
  #pending: Uint8Array[] | undefined = [];
  #log: Promise<OutputLog | undefined> | undefined;
  #logBytes = 0;
  #logFull = false;

  constructor(options: OutputCaptureOptions) {
    this.#options = options;
    this.#maxLogBytes = options.maxLogBytes ?? defaultMaxLogBytes;
    this.#streams = {
      stdout: new HeadTailBytes(options.maxBytes),
      stderr: new HeadTailBytes(options.maxBytes),
    };
  }

  /** Takes one chunk; the promise resolves when the log (if any) can take more. */
  async push(stream: StreamName, chunk: Uint8Array): Promise<void> {
    if (chunk.byteLength === 0) return;
    const callback = stream === "stdout" ? this.#options.onStdout : this.#options.onStderr;
    callback?.(chunk);
    const target = this.#streams[stream];
    target.push(chunk);
    if (this.#pending) {
      // Kept until we know whether a log is needed; bounded by 2 × maxBytes.
      this.#pending.push(chunk);
      if (!target.truncated) return;
      const earlier = this.#pending;
      this.#pending = undefined;
      this.#log = this.#options.openLog().catch(() => undefined);
      for (const piece of earlier) await this.#toLog(piece);
      return;
    }
    await this.#toLog(chunk);
  }

  /** Closes the log (if one was opened) and returns what was kept. */
  async finish(): Promise<CapturedOutput> {
    let fullOutputPath: string | undefined;
    const log = await this.#log;
    if (log) {
      if (this.#logFull) {
        await log
          .write(
            encoder.encode(`\n[cordon: output past ${this.#maxLogBytes} bytes was not saved]\n`),
          )
          .catch(() => undefined);
      }
      if (await log.close().catch(() => false)) fullOutputPath = log.path;
    }
    const truncated = this.#streams.stdout.truncated || this.#streams.stderr.truncated;
    return {
      stdout: this.#streams.stdout.text(),
      stderr: this.#streams.stderr.text(),
      truncated,
      ...(fullOutputPath === undefined ? {} : { fullOutputPath }),
    };
  }

  async #toLog(chunk: Uint8Array): Promise<void> {
    const log = await this.#log;
    if (!log || this.#logFull) return;
    const room = this.#maxLogBytes - this.#logBytes;
    const piece = chunk.byteLength > room ? chunk.subarray(0, room) : chunk;
    if (piece.byteLength < chunk.byteLength) this.#logFull = true;
    this.#logBytes += piece.byteLength;
    if (piece.byteLength > 0) await log.write(piece).catch(() => undefined);
  }
}

function concat(chunks: readonly Uint8Array[], length: number): Uint8Array {
  if (chunks.length === 1 && chunks[0]) return chunks[0];
  const out = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

/** One decoder for every whole buffer (made once: a TextDecoder is costly to make). */
const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });

function decode(bytes: Uint8Array): string {
  return bytes.byteLength === 0 ? "" : utf8.decode(bytes);
}

/** Length of `bytes` without a UTF-8 sequence cut off at its end. */
function completeUtf8Length(bytes: Uint8Array): number {
  const n = bytes.byteLength;
  for (let back = 1; back <= Math.min(3, n); back++) {
    const byte = bytes[n - back] ?? 0;
    if ((byte & 0xc0) === 0x80) continue; // continuation byte: look further back
    const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

/** Offset of the first byte in `bytes` that starts a UTF-8 sequence (skips cut continuations). */
function utf8StartOffset(bytes: Uint8Array): number {
  let offset = 0;
  while (offset < Math.min(3, bytes.byteLength) && ((bytes[offset] ?? 0) & 0xc0) === 0x80) offset++;
  return offset;
}
