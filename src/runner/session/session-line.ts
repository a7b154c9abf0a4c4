import { z } from "zod";
import type { Message, ModelUsage, StopReason } from "../model/index.js";

/*
 * One line of a session file. `kind` (default "message") says what the line does:
 * - "message": one conversation message (role + content blocks), as sent to / received from the model;
 * - "compaction": older turns were summarised: the transcript becomes this line's content (a user
 *   message holding the summary) followed by the messages from line `firstKept` on;
 * - "reset": the transcript starts over from this line (its content is a notice to the model).
 * Line numbers count valid lines from 0.
 */

const textSchema = z.object({ type: z.literal("text"), text: z.string() });
const imageSchema = z.object({
  type: z.literal("image"),
  mediaType: z.string(),
  dataBase64: z.string(),
});
const blockSchema = z.discriminatedUnion("type", [
  textSchema,
  imageSchema,
  z.object({ type: z.literal("thinking"), thinking: z.string(), signature: z.string() }),
  z.object({ type: z.literal("redacted_thinking"), data: z.string() }),
  z.object({
    type: z.literal("tool_use"),
    id: z.string(),
    name: z.string(),
    input: z.record(z.string(), z.unknown()),
    truncated: z.literal(true).optional(),
  }),
  z.object({
    type: z.literal("tool_result"),
    toolUseId: z.string(),
    content: z.array(z.discriminatedUnion("type", [textSchema, imageSchema])),
    isError: z.boolean(),
  }),
]);

const usageSchema = z.object({
  inputTokens: z.number(),
  outputTokens: z.number(),
  cacheReadTokens: z.number(),
  cacheWriteTokens: z.number(),
});

export const sessionLineSchema = z.object({
  v: z.literal(1),
  /** ISO 8601 time the line was written. */
  ts: z.string(),
  kind: z.enum(["message", "compaction", "reset"]).default("message"),
  role: z.enum(["user", "assistant"]),
  content: z.array(blockSchema),
  model: z.string().optional(),
  usage: usageSchema.optional(),
  stopReason: z
    .enum([
      "end_turn",
      "tool_use",
      "max_tokens",
      "stop_sequence",
      "pause_turn",
      "refusal",
      "model_context_window_exceeded",
    ])
    .optional(),
  /** For "compaction": the first line kept after the summary. */
  firstKept: z.number().int().nonnegative().optional(),
});

/** A parsed session line. */
export interface SessionEntry {
  v: 1;
  ts: string;
  kind: "message" | "compaction" | "reset";
  role: Message["role"];
  content: Message["content"];
  model?: string;
  usage?: ModelUsage;
  stopReason?: StopReason;
  firstKept?: number;
}

/** Parses one line; undefined when it is not a valid session line. */
export function parseSessionLine(line: string): SessionEntry | undefined {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch {
    return undefined;
  }
  const result = sessionLineSchema.safeParse(json);
  if (!result.success) return undefined;
  // zod's output matches SessionEntry except for optional-vs-undefined, which JSON never has.
  return result.data as SessionEntry;
}

/** The message of each frozen entry, made once: the transcript is rebuilt on every append. */
const entryMessages = new WeakMap<SessionEntry, Message>();

/** The line's message; frozen, and the same object each time, when the entry is frozen. */
export function entryMessage(entry: SessionEntry): Message {
  const known = entryMessages.get(entry);
  if (known) return known;
  const message = { role: entry.role, content: entry.content } as Message;
  if (!Object.isFrozen(entry)) return message;
  entryMessages.set(entry, Object.freeze(message));
  return message;
}
