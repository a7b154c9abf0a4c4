import type { Message, ToolResultBlock, ToolUseBlock, UserMessage } from "../model/index.js";
import { entryMessage, type SessionEntry } from "./session-line.js";

/** A message of the effective transcript and the line it came from (-1 for synthetic ones). */
export interface TranscriptItem {
  line: number;
  message: Message;
}

/** The transcript the model sees: compaction and reset lines applied, in order. */
export function effectiveTranscript(entries: readonly SessionEntry[]): TranscriptItem[] {
  let items: TranscriptItem[] = [];
  entries.forEach((entry, line) => {
    if (entry.kind === "message") {
      items.push({ line, message: entryMessage(entry) });
    } else if (entry.kind === "compaction") {
      const firstKept = entry.firstKept ?? line;
      items = [
        { line, message: entryMessage(entry) },
        ...items.filter((item) => item.line >= firstKept),
      ];
    } else {
      items = [{ line, message: entryMessage(entry) }];
    }
  });
  return items;
}

/** A tool result that says the call never ran, and why. */
export function syntheticToolResult(toolUseId: string, reason: string): ToolResultBlock {
  return {
    type: "tool_result",
    toolUseId,
    content: [{ type: "text", text: reason }],
    isError: true,
  };
}

export interface RepairResult {
  /** The transcript with every tool_use answered, except those of the last assistant message. */
  items: TranscriptItem[];
  /**
   * Results missing after the last assistant message; the caller appends these to the file so
   * the repair is durable.
   */
  trailing: ToolResultBlock[];
  /** How many results were made up in total. */
  repaired: number;
}

const interruptedReason =
  "This tool call has no result: the run was interrupted before it finished. It may or may not have taken effect; check before repeating it.";

/**
 * Gives every tool_use a tool_result, as the API requires. A tool_use can lack one after a crash or
 * an abort mid-tool. Results found later in the user messages that follow are left as they are.
 */
export function repairToolResults(items: readonly TranscriptItem[]): RepairResult {
  const messages: TranscriptItem[] = [];
  let trailing: ToolResultBlock[] = [];
  let repaired = 0;
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    if (!item) continue;
    const message = item.message;
    messages.push(item);
    if (message.role !== "assistant") continue;
    const uses = message.content.filter((b): b is ToolUseBlock => b.type === "tool_use");
    if (uses.length === 0) continue;
    // The results live in the user messages up to the next assistant message.
    const answered = new Set<string>();
    let j = i + 1;
    for (; j < items.length && items[j]?.message.role === "user"; j++) {
      for (const block of items[j]?.message.content ?? []) {
        if (block.type === "tool_result") answered.add(block.toolUseId);
      }
    }
    const missing = uses
      .filter((use) => !answered.has(use.id))
      .map((use) => syntheticToolResult(use.id, interruptedReason));
    if (missing.length === 0) continue;
    repaired += missing.length;
    if (j >= items.length) {
      trailing = missing;
      continue;
    }
    // Missing in the middle (a hand-edited file): patch the in-memory view right after the user
    // messages that follow; the file stays as it is, append-only.
    for (let k = i + 1; k < j; k++) {
      const kept = items[k];
      if (kept) messages.push(kept);
    }
    const patch: UserMessage = { role: "user", content: missing };
    messages.push({ line: -1, message: patch });
    i = j - 1;
  }
  return { items: messages, trailing, repaired };
}

/**
 * `repairToolResults(effectiveTranscript(entries)).items` after one more message line, from the
 * same for the lines before it, without going over the transcript again (it is rebuilt on every
 * append). A user message only adds; an assistant message turns the previous assistant message's
 * unanswered calls, which were trailing, into a gap in the middle, patched right before it.
 */
export function appendToRepaired(
  items: readonly TranscriptItem[],
  item: TranscriptItem,
): TranscriptItem[] {
  const next = [...items];
  if (item.message.role === "assistant") {
    const last = next.findLastIndex((kept) => kept.message.role === "assistant");
    const previous = next[last]?.message;
    if (previous) {
      const answered = new Set<string>();
      for (const kept of next.slice(last + 1)) {
        for (const block of kept.message.content) {
          if (block.type === "tool_result") answered.add(block.toolUseId);
        }
      }
      const missing = previous.content
        .filter((b): b is ToolUseBlock => b.type === "tool_use" && !answered.has(b.id))
        .map((use) => syntheticToolResult(use.id, interruptedReason));
      if (missing.length > 0) next.push({ line: -1, message: { role: "user", content: missing } });
    }
  }
  next.push(item);
  return next;
}
