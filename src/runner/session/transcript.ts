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
  messages: Message[];
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
  const messages: Message[] = [];
  let trailing: ToolResultBlock[] = [];
  let repaired = 0;
  for (let i = 0; i < items.length; i++) {
    const message = items[i]?.message;
    if (!message) continue;
    messages.push(message);
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
      const item = items[k];
      if (item) messages.push(item.message);
    }
    const patch: UserMessage = { role: "user", content: missing };
    messages.push(patch);
    i = j - 1;
  }
  return { messages, trailing, repaired };
}
