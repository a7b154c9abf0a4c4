import {
  completeTurn,
  type ContentBlock,
  type Message,
  type ModelClient,
  type ModelToolSpec,
  type ModelUsage,
} from "../model/index.js";
import type { TranscriptItem } from "../session/index.js";

/**
 * Estimates of messages and tool lists that cannot change (the session's are frozen), so the
 * estimate before each model call serialises only what is new rather than the whole transcript.
 */
const frozenEstimates = new WeakMap<object, number>();

function cachedEstimate(value: object, estimate: () => number): number {
  if (!Object.isFrozen(value)) return estimate();
  let tokens = frozenEstimates.get(value);
  if (tokens === undefined) {
    tokens = estimate();
    frozenEstimates.set(value, tokens);
  }
  return tokens;
}

/** About four characters a token; good enough to split a transcript by share. */
export function estimateTokens(message: Message): number {
  return cachedEstimate(message, () => Math.ceil(JSON.stringify(message.content).length / 4));
}

/** Estimated input tokens of a request: system prompt, tool schemas and messages. */
export function estimateRequestTokens(request: {
  system: string;
  tools: readonly ModelToolSpec[];
  messages: readonly Message[];
}): number {
  const tools = cachedEstimate(request.tools, () => JSON.stringify(request.tools).length / 4);
  const fixed = Math.ceil(request.system.length / 4 + tools);
  return request.messages.reduce((sum, message) => sum + estimateTokens(message), fixed);
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

/** Characters of one tool result the summariser sees; the rest is detail a summary drops. */
const toolResultChars = 2000;

/**
 * One message as plain text for the summariser: who said it, text kept, tool calls as their
 * name and input, tool results cut to their first 2000 characters, images and thinking named
 * only. Sent as text, the older turns need no tool declarations and cannot break role order.
 */
export function renderForSummary(message: Message, maxChars: number): string {
  const parts = (message.content as readonly ContentBlock[]).map((block): string => {
    switch (block.type) {
      case "text":
        return block.text;
      case "thinking":
      case "redacted_thinking":
        return "(thinking left out)";
      case "image":
        return "(an image)";
      case "tool_use":
        return `[tool call ${block.name}] ${JSON.stringify(block.input)}`;
      case "tool_result": {
        const text = block.content
          .map((part) => (part.type === "text" ? part.text : "(an image)"))
          .join("\n");
        const kept = cutMiddle(text, toolResultChars);
        return `[tool result${block.isError ? ", error" : ""}] ${kept}`;
      }
    }
  });
  return cutMiddle(`${message.role}: ${parts.join("\n")}`, maxChars);
}

/** Keeps the start and the end of a text longer than `max`, saying how much was left out. */
function cutMiddle(text: string, max: number): string {
  if (text.length <= max) return text;
  const half = Math.floor(max / 2);
  const omitted = text.length - 2 * half;
  return `${text.slice(0, half)}\n[… ${omitted} characters left out …]\n${text.slice(-half)}`;
}

/**
 * Splits rendered messages into chunks of at most `chunkChars` each, in order; a message is never
 * split (each was already cut to fit).
 */
export function splitIntoChunks(rendered: readonly string[], chunkChars: number): string[][] {
  const chunks: string[][] = [];
  let current: string[] = [];
  let size = 0;
  for (const text of rendered) {
    if (current.length > 0 && size + text.length > chunkChars) {
      chunks.push(current);
      current = [];
      size = 0;
    }
    current.push(text);
    size += text.length;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

export interface CompactOptions {
  model: ModelClient;
  modelId: string;
  transcript: readonly TranscriptItem[];
  /** Share of the estimated tokens kept verbatim (newest first). Default 0.3. */
  keepShare?: number | undefined;
  /** The model's context window in tokens (`RunPlan.limits`); sizes the chunks and the per-message cap. */
  contextWindowTokens: number;
  /** Output budget of each summary. Default 4096. */
  maxTokens?: number | undefined;
  signal: AbortSignal;
}

export interface CompactResult {
  summary: string;
  /** Session line of the first message kept. */
  firstKeptLine: number;
  summarizedMessages: number;
  keptMessages: number;
  /** Chunks the older part was split into (each summarised; several are then merged). */
  chunks: number;
  usage: ModelUsage;
}

/** Nothing older than the kept part: compacting again cannot help (the loop resets instead). */
export class NothingToCompactError extends Error {
  constructor() {
    super("the conversation has no older turns that could be summarised");
  }
}

const summarySystem = "You summarise coding-agent conversations precisely and briefly.";
const chunkInstruction =
  "Above is part of a coding agent's conversation, too long for its context window. Summarise it " +
  "for the agent to continue from: the user's goal and constraints, what was done (files changed, " +
  "commands run and their outcomes), what was learned, and what remains. Answer with the summary only.";
const mergeInstruction =
  "Above are summaries of consecutive parts of one coding agent's conversation, oldest first. " +
  "Merge them into one summary with the same headings of content (goal and constraints, what was " +
  "done, what was learned, what remains); later parts win where they disagree. Answer with the summary only.";

/**
 * Summarises the older part of a transcript and says which line to keep from (DESIGN.md §6):
 * the newest `keepShare` of the tokens stays verbatim (always the newest message); the older
 * messages are rendered as text (each cut to half the window, tool results to their first
 * characters), split into chunks by token share, each chunk summarised, and the summaries merged.
 * Throws when there is nothing to compact or a summary call fails; the caller decides what next.
 */
export async function compactTranscript(options: CompactOptions): Promise<CompactResult> {
  const messages = options.transcript.map((item) => item.message);
  const cut = chooseCut(messages, options.keepShare ?? 0.3);
  const firstKept = cut === undefined ? undefined : options.transcript[cut];
  if (cut === undefined || !firstKept || firstKept.line < 0) throw new NothingToCompactError();

  const windowChars = options.contextWindowTokens * 4;
  // A single message over half the window is cut first; a chunk is at most 40% of the window,
  // leaving room for the instruction and the summary itself.
  const rendered = messages.slice(0, cut).map((m) => renderForSummary(m, windowChars / 2));
  const chunks = splitIntoChunks(rendered, Math.floor(windowChars * 0.4));
  const usage: ModelUsage = {
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
  };
  const ask = async (text: string, instruction: string): Promise<string> => {
    const turn = await completeTurn(options.model, {
      model: options.modelId,
      system: summarySystem,
      tools: [],
      messages: [{ role: "user", content: [{ type: "text", text: `${text}\n\n${instruction}` }] }],
      maxTokens: options.maxTokens ?? 4096,
      signal: options.signal,
    });
    usage.inputTokens += turn.usage.inputTokens;
    usage.outputTokens += turn.usage.outputTokens;
    const summary = turn.message.content
      .filter((block) => block.type === "text")
      .map((block) => block.text)
      .join("\n")
      .trim();
    if (summary === "") throw new Error("the model returned an empty summary");
    return summary;
  };

  const partials: string[] = [];
  for (const chunk of chunks) partials.push(await ask(chunk.join("\n\n"), chunkInstruction));
  const merged =
    partials.length === 1
      ? (partials[0] ?? "")
      : await ask(
          partials.map((text, index) => `Part ${index + 1}:\n${text}`).join("\n\n"),
          mergeInstruction,
        );
  return {
    summary: `Summary of the earlier part of this conversation (compacted by cordon to fit the context window):\n\n${merged}`,
    firstKeptLine: firstKept.line,
    summarizedMessages: cut,
    keptMessages: messages.length - cut,
    chunks: partials.length,
    usage,
  };
}
