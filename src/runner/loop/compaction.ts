import {
  completeTurn,
  type Message,
  type ModelClient,
  type ModelToolSpec,
  type ModelUsage,
} from "../model/index.js";
import type { TranscriptItem } from "../session/index.js";

/** About four characters a token; good enough to split a transcript by share. */
export function estimateTokens(message: Message): number {
  return Math.ceil(JSON.stringify(message.content).length / 4);
}

/** Where a transcript may be cut: the kept part must start with a message the API accepts first. */
function isCutPoint(message: Message): boolean {
  if (message.role === "assistant") return true;
  return !message.content.some((block) => block.type === "tool_result");
}

/**
 * The index of the first message to keep: the newest messages holding at most `keepShare` of the
 * estimated tokens (at least the last message), moved back to a valid cut point. Undefined when
 * nothing older than that could be summarised.
 */
export function chooseCut(messages: readonly Message[], keepShare: number): number | undefined {
  const sizes = messages.map(estimateTokens);
  const total = sizes.reduce((a, b) => a + b, 0);
  if (messages.length < 2) return undefined;
  // The last message is always kept; older ones while they fit the share.
  let cut = messages.length - 1;
  let kept = sizes[cut] ?? 0;
  while (cut > 1) {
    const size = sizes[cut - 1] ?? 0;
    if (kept + size > total * keepShare) break;
    kept += size;
    cut -= 1;
  }
  // Move back (keeping more) until the kept part starts at a valid point.
  while (cut > 0 && !isCutPoint(messages[cut] as Message)) cut -= 1;
  return cut > 0 ? cut : undefined;
}

export interface CompactOptions {
  model: ModelClient;
  modelId: string;
  transcript: readonly TranscriptItem[];
  tools: readonly ModelToolSpec[];
  /** Share of the estimated tokens kept verbatim (newest first). Default 0.3. */
  keepShare?: number | undefined;
  /** Output budget of the summary. Default 4096. */
  maxTokens?: number | undefined;
  signal: AbortSignal;
}

export interface CompactResult {
  summary: string;
  /** Session line of the first message kept. */
  firstKeptLine: number;
  summarizedMessages: number;
  keptMessages: number;
  usage: ModelUsage;
}

const summaryInstruction =
  "The conversation above is getting too long for the context window. Write a concise summary " +
  "of it for yourself, to continue the task from: the user's goal and constraints, what was " +
  "done (files changed, commands run and their outcomes), what was learned, and what remains. " +
  "Do not call any tools; answer with the summary only.";

/**
 * Summarises the older part of a transcript with the model and says which line to keep from.
 * Throws when there is nothing to compact or the summary call fails; the caller then resets.
 */
export async function compactTranscript(options: CompactOptions): Promise<CompactResult> {
  const messages = options.transcript.map((item) => item.message);
  const cut = chooseCut(messages, options.keepShare ?? 0.3);
  const firstKept = cut === undefined ? undefined : options.transcript[cut];
  if (cut === undefined || !firstKept || firstKept.line < 0) {
    throw new Error("the conversation has no older turns that could be summarised");
  }
  const older = messages.slice(0, cut);
  const turn = await completeTurn(options.model, {
    model: options.modelId,
    system: "You summarise coding-agent conversations precisely and briefly.",
    // Tools stay declared: the older turns contain tool_use blocks.
    tools: options.tools,
    messages: [...older, { role: "user", content: [{ type: "text", text: summaryInstruction }] }],
    maxTokens: options.maxTokens ?? 4096,
    signal: options.signal,
  });
  const text = turn.message.content
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("\n")
    .trim();
  if (text === "") throw new Error("the model returned an empty summary");
  return {
    summary: `Summary of the earlier part of this conversation (compacted by cordon to fit the context window):\n\n${text}`,
    firstKeptLine: firstKept.line,
    summarizedMessages: cut,
    keptMessages: messages.length - cut,
    usage: turn.usage,
  };
}
