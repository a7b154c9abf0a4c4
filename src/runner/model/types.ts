/**
 * The vendor-neutral vocabulary of a model conversation. Shaped like the Anthropic Messages API
 * (that is the wire format cordon speaks), but owned by cordon: no SDK type crosses this module's
 * index.ts, so the session file, the loop and embedders never depend on an SDK version.
 */

import type { ToolResultContent } from "../../tools/index.js";
import type { ModelErrorKind } from "./model-errors.js";

/** Plain text, from the user or the model. */
export interface TextBlock {
  type: "text";
  text: string;
}

/**
 * The model's visible reasoning. `signature` must be sent back byte for byte, or the API rejects
 * the next turn; that is why blocks are stored and replayed verbatim.
 */
export interface ThinkingBlock {
  type: "thinking";
  thinking: string;
  signature: string;
}

/** Reasoning the API encrypted; `data` is opaque and sent back unchanged. */
export interface RedactedThinkingBlock {
  type: "redacted_thinking";
  data: string;
}

/** The model asks to run a tool. */
export interface ToolUseBlock {
  type: "tool_use";
  /** Unique within the conversation; the result names it. */
  id: string;
  name: string;
  /** The parsed JSON input; `{}` when the model's JSON was cut off or invalid (see `truncated`). */
  input: Record<string, unknown>;
  /**
   * Set when the model's output stopped inside this call (max_tokens or the context window) or its
   * JSON did not parse. A truncated call is never run. Not sent to the API.
   */
  truncated?: true;
}

/** An image (base64), in a user message or a tool result. */
export interface ImageBlock {
  type: "image";
  /** e.g. "image/png". */
  mediaType: string;
  dataBase64: string;
}

/** What a tool returned: text and images (declared with the tools, which produce it). */
export type { ToolResultContent };

/** The result of one tool call, in a user message right after the assistant message that asked. */
export interface ToolResultBlock {
  type: "tool_result";
  toolUseId: string;
  content: ToolResultContent[];
  isError: boolean;
}

export type AssistantContentBlock =
  TextBlock | ThinkingBlock | RedactedThinkingBlock | ToolUseBlock;
export type UserContentBlock = TextBlock | ImageBlock | ToolResultBlock;
export type ContentBlock = AssistantContentBlock | UserContentBlock;

export interface UserMessage {
  role: "user";
  content: UserContentBlock[];
}

export interface AssistantMessage {
  role: "assistant";
  content: AssistantContentBlock[];
}

export type Message = UserMessage | AssistantMessage;

/**
 * Why the model stopped. `max_tokens` and `model_context_window_exceeded` mean the output was cut
 * off; `pause_turn` means the API paused a long turn and expects the conversation to be sent back
 * to continue it; `refusal` means the model declined.
 */
export type StopReason =
  | "end_turn"
  | "tool_use"
  | "max_tokens"
  | "stop_sequence"
  | "pause_turn"
  | "refusal"
  | "model_context_window_exceeded";

/** Token counts of one model call. */
export interface ModelUsage {
  /** Uncached input tokens. */
  inputTokens: number;
  outputTokens: number;
  /** Input tokens served from the prompt cache. */
  cacheReadTokens: number;
  /** Input tokens written to the prompt cache. */
  cacheWriteTokens: number;
}

/** A tool as the model sees it. */
export interface ModelToolSpec {
  name: string;
  description: string;
  /** A JSON Schema object describing the input. */
  inputSchema: Record<string, unknown>;
}

/** Extended thinking settings. */
export interface ThinkingOptions {
  /** Tokens the model may spend thinking; at least 1024 and below `maxTokens`. */
  budgetTokens: number;
}

/** One model call. */
export interface ModelRequest {
  /** Model id, e.g. "claude-sonnet-4-5". */
  model: string;
  system: string;
  messages: readonly Message[];
  tools: readonly ModelToolSpec[];
  /** The most output tokens this one response may use. */
  maxTokens: number;
  thinking?: ThinkingOptions | undefined;
  /** Aborts the request and the stream. */
  signal?: AbortSignal | undefined;
}

/** The outcome of one model call. */
export interface ModelTurn {
  message: AssistantMessage;
  stopReason: StopReason;
  usage: ModelUsage;
  /** The model id the API reports having used. */
  model: string;
}

/**
 * A failed attempt the client will make again after `delayMs`: the transport retries of one model
 * call, announced so a stalled run says why.
 */
export interface ModelRetryEvent {
  type: "retry";
  /** Which retry this is: 1 for the first. */
  attempt: number;
  /** The most retries the client makes for one call. */
  maxRetries: number;
  /** The failure's kind (`overloaded`, `rate_limited`, `server`, `network`, …). */
  reason: ModelErrorKind;
  /** The HTTP status, when the API answered (529, 429, 500 …). */
  status?: number | undefined;
  /** The wait before the next attempt, in milliseconds (the server's `retry-after` if it gave one). */
  delayMs: number;
  /** The failure, as a sentence. */
  error: string;
}

/**
 * What a model stream yields; always ends with exactly one `done` unless it throws. `retry` events
 * come only before the first content event.
 */
export type ModelStreamEvent =
  | { type: "text-delta"; text: string }
  | { type: "thinking-delta"; thinking: string }
  | { type: "tool-use-start"; id: string; name: string }
  | ModelRetryEvent
  | { type: "done"; turn: ModelTurn };

/**
 * A model that can stream one assistant turn. Implementations throw `ModelApiError` for failures
 * (after their own transport retries) and `AbortedError` when the signal fires.
 */
export interface ModelClient {
  /** A short name for logs and events, e.g. "anthropic" or "scripted". */
  readonly provider: string;
  stream(request: ModelRequest): AsyncIterable<ModelStreamEvent>;
}

/** Zero usage, for sums. */
export function emptyUsage(): ModelUsage {
  return { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
}

/** Streams a turn and returns its final result, ignoring deltas. */
export async function completeTurn(client: ModelClient, request: ModelRequest): Promise<ModelTurn> {
  let turn: ModelTurn | undefined;
  for await (const event of client.stream(request)) {
    if (event.type === "done") turn = event.turn;
  }
  if (!turn) throw new Error(`model client ${client.provider} ended its stream without a result`);
  return turn;
}
