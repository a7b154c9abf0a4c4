import { closeSync, openSync, writeSync } from "node:fs";
import { open, stat } from "node:fs/promises";

import { z } from "zod";

import { createSilentLogger, type Logger } from "../../common/index.js";

/**
 * The events of a session's runs, one JSONL record per event, beside its transcript
 * (`<name>.events.jsonl`): what `cordon logs` prints and follows and what `cordon ps` reads to tell
 * a run's sandbox and what it is doing. A record is the stream-json envelope of the event
 * (`{v, seq, ts, runId, type, …}`, with the seq `--output-format stream-json` gives it), so
 * `cordon logs --json` prints the same records a stream-json reader got. Only the run holding the
 * session's lock writes it.
 *
 * Deltas (`text-delta`, `thinking-delta`) are left out: the `assistant-message` that ends each
 * model call carries the whole text, and the file stays one line per step. The transcript, not this
 * file, is the source of truth of the conversation: appends are not fsynced.
 */
export const runEventRecordSchema = z
  .object({
    v: z.literal(1),
    seq: z.number().int(),
    ts: z.string(),
    runId: z.string(),
    type: z.string(),
  })
  .catchall(z.unknown());
export type RunEventRecord = z.infer<typeof runEventRecordSchema>;

const unlogged = new Set(["text-delta", "thinking-delta"]);

/** Writes one run's events to its session's events file. */
export class RunEventsLog {
  readonly #runId: string;
  readonly #logger: Logger;
  #seq = 0;
  #file: string | undefined;
  /** The file, open for appending from the first write until `flushed`. */
  #fd: number | undefined;
  #pending: string[] = [];
  /** A write of what is pending is scheduled (after the burst of events being recorded). */
  #scheduled: NodeJS.Immediate | undefined;
  #failed = false;

  constructor(runId: string, logger: Logger = createSilentLogger()) {
    this.#runId = runId;
    this.#logger = logger;
  }

  /**
   * Takes one event. Until `attach` (the run does not hold the session yet) events are kept in
   * memory; after it they are appended in order.
   */
  record(event: { readonly type: string }): void {
    this.#seq += 1;
    if (unlogged.has(event.type)) return;
    const record = { v: 1, seq: this.#seq, ts: new Date().toISOString(), runId: this.#runId };
    this.#pending.push(`${JSON.stringify({ ...record, ...event })}\n`);
    this.#schedule();
  }

  /** Starts writing to `file` (once the session's lock is held), the events so far first. */
  attach(file: string): void {
    this.#file = file;
    this.#schedule();
  }

  /**
   * Resolves once everything recorded so far is written (or has failed, logged once), and closes
   * the file; an event recorded later opens it again.
   */
  flushed(): Promise<void> {
    this.#flush();
    if (this.#fd !== undefined) {
      const fd = this.#fd;
      this.#fd = undefined;
      try {
        closeSync(fd);
      } catch {
        // Nothing is pending on it: what was written is written.
      }
    }
    return Promise.resolve();
  }

  /**
   * The events of one step (a tool call makes five or six) go out in one append, once the step's
   * synchronous work is done: a small append to the page cache is a few microseconds written
   * synchronously, where an asynchronous append per event kept the thread pool and the loop busy.
   * The file stays open for the run: opening and closing it per step cost as much as the write.
   */
  #schedule(): void {
    if (this.#file === undefined || this.#scheduled) return;
    this.#scheduled = setImmediate(() => this.#flush());
  }

  #flush(): void {
    if (this.#scheduled) clearImmediate(this.#scheduled);
    this.#scheduled = undefined;
    const file = this.#file;
    if (file === undefined || this.#pending.length === 0) return;
    const text = this.#pending.join("");
    this.#pending = [];
    if (this.#failed) return;
    try {
      this.#fd ??= openSync(file, "a", 0o600);
      const bytes = Buffer.from(text, "utf8");
      // A regular file takes a write whole, but writeSync may say otherwise: the rest follows.
      for (let done = 0; done < bytes.length;) {
        done += writeSync(this.#fd, bytes, done);
      }
    } catch (error) {
      // The run goes on without its log: `logs` and `ps` see less, the transcript is intact.
      this.#failed = true;
      this.#logger.warn({ err: error, file }, "writing the run's events failed");
    }
  }
}

/**
 * Complete records of an events file from byte `offset` on, and where the next read starts. A
 * negative `offset` reads about that many bytes from the end, from the first whole line in them.
 */
export async function readRunEvents(
  file: string,
  offset = 0,
): Promise<{ records: RunEventRecord[]; next: number }> {
  let handle;
  try {
    handle = await open(file, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { records: [], next: offset };
    throw error;
  }
  try {
    const { size } = await handle.stat();
    const from = offset < 0 ? Math.max(0, size + offset) : offset;
    // A file shorter than where the last read ended was replaced: read it again from the start.
    if (size <= from) return { records: [], next: size < from ? 0 : from };
    const buffer = Buffer.alloc(size - from);
    await handle.read(buffer, 0, buffer.length, from);
    const start = from > 0 && offset < 0 ? buffer.indexOf(0x0a) + 1 : 0;
    // A line without its newline is still being written: it is read on the next call.
    const end = buffer.lastIndexOf(0x0a) + 1;
    const records: RunEventRecord[] = [];
    for (const line of buffer.subarray(start, Math.max(start, end)).toString("utf8").split("\n")) {
      if (line.trim() === "") continue;
      const parsed = parseRecord(line);
      if (parsed) records.push(parsed);
    }
    return { records, next: from + end };
  } finally {
    await handle.close();
  }
}

function parseRecord(line: string): RunEventRecord | undefined {
  try {
    const parsed = runEventRecordSchema.safeParse(JSON.parse(line));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Size and last write of an events file, or undefined when there is none. */
export async function runEventsFileInfo(
  file: string,
): Promise<{ sizeBytes: number; updatedAt: Date } | undefined> {
  const info = await stat(file).catch(() => undefined);
  return info?.isFile() ? { sizeBytes: info.size, updatedAt: info.mtime } : undefined;
}
