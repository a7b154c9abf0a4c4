import Anthropic from "@anthropic-ai/sdk";
import { AbortedError, sleep, type Logger } from "../../common/index.js";
import { fromSdkError } from "./anthropic-errors.js";
import { transportRetryWaitMs } from "./anthropic-retry.js";
import { mergeUsage, toSdkParams, toStopReason } from "./anthropic-wire.js";
import { fixForKind, ModelApiError } from "./model-errors.js";
import {
  emptyUsage,
  type AssistantContentBlock,
  type ModelClient,
  type ModelRequest,
  type ModelStreamEvent,
  type StopReason,
  type ToolUseBlock,
} from "./types.js";

export interface AnthropicModelClientOptions {
  /** API key. One of `apiKey` or `authToken` is required. */
  apiKey?: string | undefined;
  /** OAuth / bearer token, for gateways that want `Authorization: Bearer`. */
  authToken?: string | undefined;
  /**
   * Any server that speaks the Messages API, e.g. from ANTHROPIC_BASE_URL. Default: Anthropic's API.
   * Passed in by the caller; this module never reads the environment.
   */
  baseURL?: string | undefined;
  /**
   * Transport retries of one model call (429, 5xx, 529, network; see anthropic-retry.ts), each
   * announced by a `retry` stream event. Made here, not by the SDK, so they can be seen. Default 2.
   */
  maxRetries?: number | undefined;
  /** Time limit of one HTTP attempt, in milliseconds. Default 600_000 (the SDK's). */
  timeoutMs?: number | undefined;
  /** Where the SDK's own warnings go. Default: nowhere. */
  logger?: Logger | undefined;
  /** Replaces `fetch` (tests, proxies). */
  fetch?: typeof fetch | undefined;
}

/** The settings an Anthropic client takes from an environment map (never `process.env` itself). */
export function anthropicOptionsFromEnv(
  env: Readonly<Record<string, string | undefined>>,
): AnthropicModelClientOptions {
  const options: AnthropicModelClientOptions = {};
  if (env["ANTHROPIC_API_KEY"]) options.apiKey = env["ANTHROPIC_API_KEY"];
  else if (env["ANTHROPIC_AUTH_TOKEN"]) options.authToken = env["ANTHROPIC_AUTH_TOKEN"];
  if (env["ANTHROPIC_BASE_URL"]) options.baseURL = env["ANTHROPIC_BASE_URL"];
  return options;
}

interface BlockState {
  block: AssistantContentBlock | undefined;
  json: string;
  stopped: boolean;
}

/** A `ModelClient` on the official SDK's streaming Messages API. */
export class AnthropicModelClient implements ModelClient {
  readonly provider = "anthropic";
  readonly #client: Anthropic;
  readonly #maxRetries: number;

  constructor(options: AnthropicModelClientOptions) {
    if (!options.apiKey && !options.authToken) {
      throw new ModelApiError("No Anthropic API key was given.", {
        kind: "auth",
        fix: fixForKind("auth"),
      });
    }
    const logger = options.logger;
    this.#maxRetries = options.maxRetries ?? 2;
    this.#client = new Anthropic({
      ...(options.apiKey ? { apiKey: options.apiKey } : { authToken: options.authToken ?? null }),
      baseURL: options.baseURL ?? null,
      // cordon retries itself, visibly (see stream); the SDK's retries would be silent.
      maxRetries: 0,
      ...(options.timeoutMs !== undefined ? { timeout: options.timeoutMs } : {}),
      ...(options.fetch ? { fetch: options.fetch } : {}),
      logLevel: logger ? "warn" : "off",
      ...(logger
        ? {
            logger: {
              error: (message: string) => logger.error({ sdk: true }, message),
              warn: (message: string) => logger.warn({ sdk: true }, message),
              info: (message: string) => logger.info({ sdk: true }, message),
              debug: (message: string) => logger.debug({ sdk: true }, message),
            },
          }
        : {}),
    });
  }

  /**
   * One model call with its transport retries. A failure is retried only while nothing has been
   * yielded: once deltas reached the caller, a second attempt would repeat them.
   */
  async *stream(request: ModelRequest): AsyncGenerator<ModelStreamEvent> {
    for (let retry = 1; ; retry++) {
      let yielded = false;
      try {
        for await (const event of this.#attempt(request)) {
          yielded = true;
          yield event;
        }
        return;
      } catch (error) {
        const wait = this.#retryWait(error, retry, yielded);
        if (wait === undefined || !(error instanceof ModelApiError)) throw error;
        yield {
          type: "retry",
          attempt: retry,
          maxRetries: this.#maxRetries,
          reason: error.kind,
          status: error.status,
          delayMs: wait,
          error: error.message,
        };
        try {
          await sleep(wait, request.signal);
        } catch (aborted) {
          throw new AbortedError("the model request was aborted", { cause: aborted });
        }
      }
    }
  }

  /** The wait before retry number `retry` after `error`, or undefined to give up. */
  #retryWait(error: unknown, retry: number, yielded: boolean): number | undefined {
    if (yielded || retry > this.#maxRetries || !(error instanceof ModelApiError)) return undefined;
    // A spend limit can come as a 429; waiting will not pay the bill.
    if (error.kind === "billing" || error.kind === "auth") return undefined;
    return transportRetryWaitMs(error.cause, retry);
  }

  async *#attempt(request: ModelRequest): AsyncGenerator<ModelStreamEvent> {
    const signal = request.signal;
    if (signal?.aborted) throw new AbortedError("the model request was aborted");
    const blocks: BlockState[] = [];
    const usage = emptyUsage();
    let model = request.model;
    let stopReason: StopReason | undefined;
    let stopped = false;

    const stream = this.#client.messages.stream(
      toSdkParams(request),
      signal ? { signal } : undefined,
    );
    try {
      for await (const event of stream) {
        switch (event.type) {
          case "message_start":
            model = event.message.model;
            mergeUsage(usage, event.message.usage);
            break;
          case "content_block_start":
            blocks[event.index] = {
              block: startBlock(event.content_block),
              json: "",
              stopped: false,
            };
            if (event.content_block.type === "tool_use") {
              yield {
                type: "tool-use-start",
                id: event.content_block.id,
                name: event.content_block.name,
              };
            }
            break;
          case "content_block_delta": {
            const state = blocks[event.index];
            const block = state?.block;
            if (!state || !block) break;
            const delta = event.delta;
            if (delta.type === "text_delta" && block.type === "text") {
              block.text += delta.text;
              yield { type: "text-delta", text: delta.text };
            } else if (delta.type === "thinking_delta" && block.type === "thinking") {
              block.thinking += delta.thinking;
              yield { type: "thinking-delta", thinking: delta.thinking };
            } else if (delta.type === "signature_delta" && block.type === "thinking") {
              block.signature = delta.signature;
            } else if (delta.type === "input_json_delta" && block.type === "tool_use") {
              state.json += delta.partial_json;
            }
            break;
          }
          case "content_block_stop": {
            const state = blocks[event.index];
            if (state) state.stopped = true;
            break;
          }
          case "message_delta":
            stopReason = toStopReason(event.delta.stop_reason);
            mergeUsage(usage, event.usage);
            break;
          case "message_stop":
            stopped = true;
            break;
        }
      }
      // The iterator ends quietly when the stream errored between reads; done() rethrows it.
      await stream.done();
    } catch (error) {
      throw fromSdkError(error, signal);
    }
    if (signal?.aborted) throw new AbortedError("the model request was aborted");
    if (!stopped) {
      throw new ModelApiError("The model API stream ended before the message was complete.", {
        kind: "network",
        fix: fixForKind("network"),
      });
    }
    const reason = stopReason ?? "end_turn";
    const content = finishBlocks(blocks, reason);
    yield {
      type: "done",
      turn: { message: { role: "assistant", content }, stopReason: reason, usage, model },
    };
  }
}

function startBlock(block: Anthropic.ContentBlock): AssistantContentBlock | undefined {
  switch (block.type) {
    case "text":
      return { type: "text", text: block.text };
    case "thinking":
      return { type: "thinking", thinking: block.thinking, signature: block.signature };
    case "redacted_thinking":
      return { type: "redacted_thinking", data: block.data };
    case "tool_use":
      return { type: "tool_use", id: block.id, name: block.name, input: {} };
    default:
      // Server tools are never offered, so their blocks cannot come back; ignore if they do.
      return undefined;
  }
}

/**
 * Final blocks. A tool call is marked truncated, and so never run, when its block did not stop,
 * its JSON does not parse to an object, or the output was cut off while it was the last block.
 */
function finishBlocks(states: BlockState[], stopReason: StopReason): AssistantContentBlock[] {
  const cutOff = stopReason === "max_tokens" || stopReason === "model_context_window_exceeded";
  const content: AssistantContentBlock[] = [];
  const present = states.filter((s): s is BlockState => s?.block !== undefined);
  present.forEach((state, position) => {
    const block = state.block;
    if (!block) return;
    if (block.type !== "tool_use") {
      content.push(block);
      return;
    }
    const parsed = parseInput(state.json);
    const isLast = position === present.length - 1;
    const tool: ToolUseBlock = { ...block, input: parsed ?? {} };
    if (parsed === undefined || !state.stopped || (cutOff && isLast)) tool.truncated = true;
    content.push(tool);
  });
  return content;
}

function parseInput(json: string): Record<string, unknown> | undefined {
  if (json.trim() === "") return {};
  try {
    const value: unknown = JSON.parse(json);
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}
