import type Anthropic from "@anthropic-ai/sdk";
import type {
  ContentBlock,
  Message,
  ModelRequest,
  ModelUsage,
  StopReason,
  ToolResultContent,
} from "./types.js";

type Params = Anthropic.MessageCreateParamsStreaming;
type BlockParam = Anthropic.ContentBlockParam;

const ephemeral = { type: "ephemeral" } as const;

/**
 * The SDK request for one of our requests. Consecutive messages of one role are merged (the
 * session stores each tool result on its own line so a crash loses at most one; the API wants all
 * results of a turn in the one user message that follows it).
 *
 * Prompt caching: breakpoints on the system prompt, the last tool (tools and system are the stable
 * prefix of every call in a run) and the last block of the conversation, so each turn reads the
 * previous turn's prefix from the cache.
 */
export function toSdkParams(request: ModelRequest): Params {
  const messages = mergeRoles(request.messages).map(toSdkMessage);
  markLastBlockForCache(messages);
  const tools: Anthropic.Tool[] = request.tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    input_schema: tool.inputSchema as Anthropic.Tool.InputSchema,
  }));
  const lastTool = tools.at(-1);
  if (lastTool) lastTool.cache_control = ephemeral;

  const params: Params = {
    model: request.model,
    max_tokens: request.maxTokens,
    system: [{ type: "text", text: request.system, cache_control: ephemeral }],
    messages,
    stream: true,
  };
  if (tools.length > 0) params.tools = tools;
  if (request.thinking) {
    params.thinking = { type: "enabled", budget_tokens: request.thinking.budgetTokens };
  }
  return params;
}

function mergeRoles(messages: readonly Message[]): Message[] {
  const merged: Message[] = [];
  for (const message of messages) {
    const last = merged.at(-1);
    if (last && last.role === message.role) {
      // Same role, so the content unions are the same type; TS cannot see that through the union.
      (last.content as ContentBlock[]).push(...message.content);
    } else {
      merged.push({ role: message.role, content: [...message.content] } as Message);
    }
  }
  // The API wants tool results first in a user message; a steering text can precede them in the file.
  for (const message of merged) {
    if (message.role !== "user") continue;
    const results = message.content.filter((b) => b.type === "tool_result");
    const others = message.content.filter((b) => b.type !== "tool_result");
    message.content = [...results, ...others];
  }
  return merged;
}

function toSdkMessage(message: Message): Anthropic.MessageParam {
  return { role: message.role, content: message.content.map(toSdkBlock) };
}

function toSdkBlock(block: ContentBlock): BlockParam {
  switch (block.type) {
    case "text":
      return { type: "text", text: block.text };
    case "thinking":
      return { type: "thinking", thinking: block.thinking, signature: block.signature };
    case "redacted_thinking":
      return { type: "redacted_thinking", data: block.data };
    case "tool_use":
      return { type: "tool_use", id: block.id, name: block.name, input: block.input };
    case "image":
      return imageParam(block);
    case "tool_result":
      return {
        type: "tool_result",
        tool_use_id: block.toolUseId,
        content: block.content.map((part) =>
          part.type === "text" ? { type: "text" as const, text: part.text } : imageParam(part),
        ),
        is_error: block.isError,
      };
  }
}

function imageParam(
  block: Extract<ToolResultContent, { type: "image" }>,
): Anthropic.ImageBlockParam {
  return {
    type: "image",
    source: {
      type: "base64",
      media_type: block.mediaType as Anthropic.Base64ImageSource["media_type"],
      data: block.dataBase64,
    },
  };
}

function markLastBlockForCache(messages: Anthropic.MessageParam[]): void {
  const content = messages.at(-1)?.content;
  if (!Array.isArray(content)) return;
  const last = content.at(-1);
  // Thinking blocks cannot carry cache_control; the last message is a user message in practice.
  if (last && last.type !== "thinking" && last.type !== "redacted_thinking") {
    (last as { cache_control?: unknown }).cache_control = ephemeral;
  }
}

const stopReasons: ReadonlySet<string> = new Set<StopReason>([
  "end_turn",
  "tool_use",
  "max_tokens",
  "stop_sequence",
  "pause_turn",
  "refusal",
  "model_context_window_exceeded",
]);

/** A stop reason we know; unknown future values count as `end_turn` so no tool runs blindly. */
export function toStopReason(value: string | null | undefined): StopReason {
  return value && stopReasons.has(value) ? (value as StopReason) : "end_turn";
}

interface SdkUsageLike {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}

/** Usage counters; later (message_delta) values overwrite earlier (message_start) ones. */
export function mergeUsage(into: ModelUsage, usage: SdkUsageLike): void {
  if (usage.input_tokens != null) into.inputTokens = usage.input_tokens;
  if (usage.output_tokens != null) into.outputTokens = usage.output_tokens;
  if (usage.cache_read_input_tokens != null) into.cacheReadTokens = usage.cache_read_input_tokens;
  if (usage.cache_creation_input_tokens != null) {
    into.cacheWriteTokens = usage.cache_creation_input_tokens;
  }
}
