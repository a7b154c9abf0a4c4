import { writeSync } from "node:fs";
import { mkdir, open, readFile, type FileHandle } from "node:fs/promises";
import path from "node:path";
import {
  CordonError,
  ExitCode,
  freezeDeep,
  throwIfAborted,
  type Logger,
  createSilentLogger,
} from "../../common/index.js";
import type {
  ContentBlock,
  Message,
  ModelUsage,
  StopReason,
  ToolResultBlock,
  ToolUseBlock,
  UserMessage,
} from "../model/index.js";
import { entryMessage, parseSessionLine, type SessionEntry } from "./session-line.js";
import { sessionFilePath } from "./session-name.js";
import {
  appendToRepaired,
  effectiveTranscript,
  repairToolResults,
  syntheticToolResult,
  type TranscriptItem,
} from "./transcript.js";

/** How long a written line may wait for its fdatasync (see `JsonlSession`). */
const syncEveryMs = 1_000;

/** A session file cannot be read as a session. */
export class SessionCorruptError extends CordonError {
  readonly code = "session_corrupt";
  readonly exitCode = ExitCode.internal;
}

export interface OpenSessionOptions {
  /** cordon's state directory; the file is `<stateDir>/sessions/<project>/<safe-name>.jsonl`. */
  stateDir: string;
  /** e.g. `agent:main:main`. */
  sessionKey: string;
  /** The plan's `agent.workspaceId`: transcripts are kept per project (see `sessionsDirectory`). */
  project?: string | undefined;
  logger?: Logger | undefined;
  signal?: AbortSignal | undefined;
}

/** Extra facts stored with an assistant message. */
export interface AppendMeta {
  model?: string | undefined;
  usage?: ModelUsage | undefined;
  stopReason?: StopReason | undefined;
}

/**
 * A session: an append-only JSONL file, one message a line, the source of truth of the
 * conversation. Every append is written before it resolves, so a process that dies (killed,
 * crashed) loses at most the line being written, and that torn line is dropped on the next load.
 * It reaches the disk behind the loop, at most `syncEveryMs` after it was written (one fdatasync
 * for what was written in that time) and at `close`: a sync costs ~1-3 ms on ext4, and holds the
 * file's lock, so a sync per line made the loop wait for two a tool call — more than everything
 * else the loop does. An OS crash or power loss loses at most that last second of lines; a tool
 * call left without its result is answered on load.
 */
export class JsonlSession {
  readonly #entries: SessionEntry[];
  readonly #handle: FileHandle;
  readonly #logger: Logger;
  #items: TranscriptItem[];
  #writes: Promise<void> = Promise.resolve();
  /** The next fdatasync, once lines were written since the last one. */
  #syncTimer: NodeJS.Timeout | undefined;
  #syncing: Promise<void> | undefined;
  #closed = false;

  private constructor(
    readonly sessionKey: string,
    readonly path: string,
    handle: FileHandle,
    entries: SessionEntry[],
    logger: Logger,
  ) {
    this.#handle = handle;
    this.#entries = entries;
    this.#logger = logger;
    this.#items = [];
  }

  /**
   * Opens (creating if needed) the session file, drops a torn last line, and answers any tool call
   * left without a result (a crash or abort mid-tool) with a synthetic error result, on disk.
   */
  static async open(options: OpenSessionOptions): Promise<JsonlSession> {
    throwIfAborted(options.signal, "opening the session");
    const logger = (options.logger ?? createSilentLogger()).child({
      sessionKey: options.sessionKey,
    });
    const file = sessionFilePath(options.stateDir, options.sessionKey, options.project);
    await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    const { entries, validBytes, tornBytes } = await readEntries(file, options.signal);
    const handle = await open(file, "a+", 0o600);
    try {
      if (tornBytes > 0) {
        logger.warn(
          { file, droppedBytes: tornBytes },
          "the last line of the session was incomplete (a crash while writing); it was dropped",
        );
        // Cut the torn bytes so the next append starts on a clean line.
        await handle.truncate(validBytes);
        await handle.sync();
      }
      const session = new JsonlSession(options.sessionKey, file, handle, entries, logger);
      await session.#repair();
      return session;
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /** Every line, in order (copies). */
  get entries(): readonly SessionEntry[] {
    return structuredClone(this.#entries);
  }

  /**
   * The conversation the model sees next: compaction/reset applied, every tool_use answered. The
   * messages are frozen (deeply: a line once written never changes), so they are handed out
   * without a copy; the array is the caller's. Copying the whole transcript twice a turn was most
   * of what the loop itself cost per tool call (issue 31).
   */
  messages(): Message[] {
    return this.#items.map((item) => item.message);
  }

  /**
   * `messages()` with the line each came from (-1 for repairs made in memory), so compaction can
   * name the first line it keeps.
   */
  transcript(): TranscriptItem[] {
    return this.#items.map((item) => ({ ...item }));
  }

  /** Number of valid lines. */
  get lineCount(): number {
    return this.#entries.length;
  }

  /** Tool calls of the last assistant message that have no result yet. */
  openToolUses(): ToolUseBlock[] {
    const messages = this.#items.map((item) => item.message);
    const lastAssistant = messages.findLastIndex((m) => m.role === "assistant");
    const message = messages[lastAssistant];
    if (!message) return [];
    const answered = new Set(
      messages
        .slice(lastAssistant + 1)
        .flatMap((m): readonly ContentBlock[] => m.content)
        .filter((b): b is ToolResultBlock => b.type === "tool_result")
        .map((b) => b.toolUseId),
    );
    return message.content.filter(
      (b): b is ToolUseBlock => b.type === "tool_use" && !answered.has(b.id),
    );
  }

  /** Appends one message; resolves once it is on disk. */
  async append(message: Message, meta: AppendMeta = {}): Promise<void> {
    const entry: SessionEntry = {
      v: 1,
      ts: new Date().toISOString(),
      kind: "message",
      role: message.role,
      // A copy: the transcript holds it frozen, and the caller keeps its own.
      content: structuredClone(message.content),
    };
    if (meta.model !== undefined) entry.model = meta.model;
    if (meta.usage !== undefined) entry.usage = { ...meta.usage };
    if (meta.stopReason !== undefined) entry.stopReason = meta.stopReason;
    await this.#write(entry);
  }

  /** Answers each open tool call with an error result saying why it did not run. */
  async answerOpenToolUses(reason: string): Promise<number> {
    const open = this.openToolUses();
    for (const use of open) {
      await this.append({ role: "user", content: [syntheticToolResult(use.id, reason)] });
    }
    return open.length;
  }

  /**
   * Records a compaction: from now on the transcript is `summary` followed by the messages from
   * line `firstKept` on.
   */
  async appendCompaction(summary: string, firstKept: number): Promise<void> {
    await this.#write({
      v: 1,
      ts: new Date().toISOString(),
      kind: "compaction",
      role: "user",
      content: [{ type: "text", text: summary }],
      firstKept,
    });
  }

  /** Starts the transcript over; `notice` tells the model what happened. */
  async appendReset(notice: string): Promise<void> {
    await this.#write({
      v: 1,
      ts: new Date().toISOString(),
      kind: "reset",
      role: "user",
      content: [{ type: "text", text: notice }],
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#writes.catch(() => undefined);
    if (this.#syncTimer) {
      clearTimeout(this.#syncTimer);
      this.#syncTimer = undefined;
      this.#sync();
    }
    await this.#syncing;
    await this.#handle.close();
  }

  #write(entry: SessionEntry): Promise<void> {
    if (this.#closed) {
      return Promise.reject(new Error(`session ${this.sessionKey} is closed`));
    }
    // Appends are chained so concurrent callers never interleave bytes of two lines. The write
    // itself is synchronous: one line into the page cache is a few microseconds, where a trip
    // through the thread pool and back costs a tool call more than the write.
    const write = this.#writes.then(() => {
      writeSync(this.#handle.fd, `${JSON.stringify(entry)}\n`);
      this.#syncBehind();
      this.#entries.push(freezeDeep(entry));
      this.#items =
        entry.kind === "message"
          ? appendToRepaired(this.#items, {
              line: this.#entries.length - 1,
              message: entryMessage(entry),
            })
          : repairToolResults(effectiveTranscript(this.#entries)).items;
    });
    this.#writes = write.catch(() => undefined);
    return write;
  }

  /** Schedules a sync of what was written, unless one is scheduled (it will include this). */
  #syncBehind(): void {
    if (this.#syncTimer) return;
    this.#syncTimer = setTimeout(() => {
      this.#syncTimer = undefined;
      this.#sync();
    }, syncEveryMs);
    // A process that is done otherwise does not stay for it (it exits through `close`).
    this.#syncTimer.unref();
  }

  #sync(): void {
    const previous = this.#syncing ?? Promise.resolve();
    this.#syncing = previous
      .then(() => this.#handle.datasync())
      .catch((error: unknown) => {
        this.#logger.warn({ err: error }, "the session file could not be synced to disk");
      });
  }

  #recompute(): void {
    this.#items = repairToolResults(effectiveTranscript(this.#entries)).items;
  }

  async #repair(): Promise<void> {
    const { trailing, repaired } = repairToolResults(effectiveTranscript(this.#entries));
    if (repaired > 0) {
      this.#logger.warn(
        { repaired },
        "tool calls without a result were answered with an error result (the last run was interrupted)",
      );
    }
    // The transcript as loaded first: appends extend it.
    this.#recompute();
    if (trailing.length > 0) {
      const message: UserMessage = { role: "user", content: trailing };
      await this.append(message);
    }
  }
}

async function readEntries(
  file: string,
  signal: AbortSignal | undefined,
): Promise<{ entries: SessionEntry[]; validBytes: number; tornBytes: number }> {
  let data: Buffer;
  try {
    data = await readFile(file, { signal });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      return { entries: [], validBytes: 0, tornBytes: 0 };
    }
    throw error;
  }
  const entries: SessionEntry[] = [];
  let offset = 0;
  let lineNumber = 0;
  while (offset < data.length) {
    const end = data.indexOf(0x0a, offset);
    const isLast = end === -1 || end === data.length - 1;
    const lineEnd = end === -1 ? data.length : end;
    const text = data.subarray(offset, lineEnd).toString("utf8");
    lineNumber += 1;
    // A line is complete only with its newline; without it the append never returned, so the
    // step it recorded never happened, even if the JSON parses.
    if (end === -1) return { entries, validBytes: offset, tornBytes: data.length - offset };
    const entry = text.trim() === "" ? undefined : parseSessionLine(text);
    if (entry) {
      entries.push(freezeDeep(entry));
    } else if (text.trim() !== "") {
      if (isLast) return { entries, validBytes: offset, tornBytes: data.length - offset };
      throw new SessionCorruptError(
        `Line ${lineNumber} of the session file ${file} is not a valid session line.`,
        {
          fix: `Move ${file} aside to start the session fresh, or use another --session name.`,
        },
      );
    }
    offset = end === -1 ? data.length : end + 1;
  }
  return { entries, validBytes: data.length, tornBytes: 0 };
}

/**
 * The lines of a session, read without opening it for writing: no torn-line cut, no repair. For
 * inspection (`cordon sessions show`) while a run may still be appending.
 */
export async function readSessionEntries(options: {
  stateDir: string;
  sessionKey: string;
  project?: string | undefined;
  signal?: AbortSignal | undefined;
}): Promise<SessionEntry[]> {
  const file = sessionFilePath(options.stateDir, options.sessionKey, options.project);
  const { entries } = await readEntries(file, options.signal);
  return entries;
}
