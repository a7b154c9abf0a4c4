import { randomUUID } from "node:crypto";
import {
  AbortedError,
  createSilentLogger,
  messageOf,
  sleep,
  type Logger,
} from "../../common/index.js";
import {
  emptyUsage,
  fixForKind,
  ModelApiError,
  type AssistantMessage,
  type Message,
  type ModelClient,
  type ModelTurn,
  type ThinkingOptions,
  type ToolResultBlock,
  type ToolUseBlock,
  type UserContentBlock,
} from "../model/index.js";
import type { AppendMeta, TranscriptItem } from "../session/index.js";
import { syntheticToolResult } from "../session/index.js";
import { compactTranscript } from "./compaction.js";
import type { MessageQueue } from "./message-queue.js";
import { exitCodeForStatus, type RunEvent, type RunResult, type RunStatus } from "./run-events.js";
import { executeToolCall, type RunnerToolset } from "./tool-executor.js";

/** The session operations the loop needs; `JsonlSession` has them. */
export interface LoopSession {
  readonly sessionKey: string;
  messages(): Message[];
  transcript(): TranscriptItem[];
  append(message: Message, meta?: AppendMeta): Promise<void>;
  answerOpenToolUses(reason: string): Promise<number>;
  appendCompaction(summary: string, firstKept: number): Promise<void>;
  appendReset(notice: string): Promise<void>;
}

/** A model to fall back to when the current one keeps failing. */
export interface FallbackModel {
  modelId: string;
  /** Another client (e.g. another provider); default: the run's client. */
  client?: ModelClient | undefined;
}

export interface RunLimits {
  /** Most model calls in this run. Default 50. */
  maxTurns?: number | undefined;
  /** Wall-clock limit of the run in milliseconds. Default: none. */
  timeoutMs?: number | undefined;
  /** Token budget of the run (input + output, summed over calls). Default: none. */
  maxTokens?: number | undefined;
  /** Most output tokens of one model response. Default 8192. */
  maxOutputTokens?: number | undefined;
}

export interface AgentLoopOptions {
  model: ModelClient;
  /** The model id to call first, e.g. "claude-sonnet-4-5". */
  modelId: string;
  /** Tried in order when the current model fails after its retry; each at most once. */
  fallbackModels?: readonly FallbackModel[] | undefined;
  toolset: RunnerToolset;
  session: LoopSession;
  systemPrompt: string;
  /** The user's message for this run; omit to continue the session as it is. */
  prompt?: string | UserContentBlock[] | undefined;
  limits?: RunLimits | undefined;
  thinking?: ThinkingOptions | undefined;
  /** Aborts the run: stops the model stream and the running tool; the session stays consistent. */
  signal?: AbortSignal | undefined;
  logger?: Logger | undefined;
  /** Receives every event; a throwing listener is logged and ignored. */
  onEvent?: ((event: RunEvent) => void) | undefined;
  /** Messages delivered between tool calls; the rest of that turn's calls are skipped. */
  steering?: MessageQueue | undefined;
  /** Messages delivered when the model would otherwise stop. */
  followUps?: MessageQueue | undefined;
  runId?: string | undefined;
  /** Wait before the one retry of a transient model error, when the API gave none. Default 2000 ms. */
  retryDelayMs?: number | undefined;
  /** Longest wait we accept from a retry-after header, in ms. Default 60_000. */
  maxRetryDelayMs?: number | undefined;
  /** Share of the transcript's tokens compaction keeps verbatim. Default 0.3. */
  compactionKeepShare?: number | undefined;
}

/** Ends the run with a status; thrown inside the loop, caught at its edge. */
class RunStop extends Error {
  constructor(
    readonly status: RunStatus,
    message: string,
    readonly fix?: string,
  ) {
    super(message);
  }
}

const abortedToolReason =
  "This tool call was not completed: the run was interrupted. It may or may not have taken effect; check before repeating it.";
const steeringSkipReason =
  "Skipped: the user sent a new message before this call ran. Read it, then decide whether this call is still needed.";

/**
 * The agent loop (DESIGN.md §6). Inner loop: stream the model, append the assistant message, run
 * its tool calls and append each result, repeat until the model stops or a limit hits. Outer
 * guards, each at most once per run: one retry of a transient error, a thinking downgrade,
 * compaction on context overflow and then one session reset; plus a fallback chain. Never throws:
 * every outcome is a `RunResult`, also emitted as the last event, `run-end`.
 */
export async function runAgentLoop(options: AgentLoopOptions): Promise<RunResult> {
  const runId = options.runId ?? randomUUID();
  const session = options.session;
  const logger = (options.logger ?? createSilentLogger()).child({
    runId,
    sessionKey: session.sessionKey,
  });
  const emit = (event: RunEvent): void => {
    try {
      options.onEvent?.(event);
    } catch (error) {
      logger.warn({ err: error }, "an event listener threw; the run goes on");
    }
  };
  const limits = {
    maxTurns: options.limits?.maxTurns ?? 50,
    maxTokens: options.limits?.maxTokens,
    maxOutputTokens: options.limits?.maxOutputTokens ?? 8192,
    timeoutMs: options.limits?.timeoutMs,
  };

  const timeout = new AbortController();
  const timer =
    limits.timeoutMs === undefined
      ? undefined
      : setTimeout(() => timeout.abort(new AbortedError("the run timed out")), limits.timeoutMs);
  const signal = options.signal
    ? AbortSignal.any([options.signal, timeout.signal])
    : timeout.signal;

  const usage = emptyUsage();
  const state = {
    turns: 0,
    modelId: options.modelId,
    client: options.model,
    thinking: options.thinking,
    fallbacks: [...(options.fallbackModels ?? [])],
    retried: false,
    thinkingDowngraded: false,
    compacted: false,
    reset: false,
    finalText: "",
  };
  const prompt: UserContentBlock[] | undefined =
    options.prompt === undefined
      ? undefined
      : typeof options.prompt === "string"
        ? [{ type: "text", text: options.prompt }]
        : options.prompt;

  const addUsage = (turn: ModelTurn["usage"]): void => {
    usage.inputTokens += turn.inputTokens;
    usage.outputTokens += turn.outputTokens;
    usage.cacheReadTokens = turn.cacheReadTokens;
    usage.cacheWriteTokens = turn.cacheWriteTokens;
    emit({ type: "usage", turn: { ...turn }, total: { ...usage } });
  };

  const checkAbort = (): void => {
    if (!signal.aborted) return;
    if (timeout.signal.aborted) {
      throw new RunStop(
        "timeout",
        `The run stopped after its time limit of ${formatDuration(limits.timeoutMs ?? 0)}.`,
        "Raise the limit with --timeout, or split the task into smaller runs.",
      );
    }
    throw new RunStop(
      "aborted",
      "The run was interrupted.",
      "Run again with the same --session to continue where it stopped.",
    );
  };

  /** One model call, streamed; text deltas are emitted as they come. */
  const callModel = async (): Promise<ModelTurn> => {
    emit({ type: "model-start", turn: state.turns + 1, model: state.modelId });
    let turn: ModelTurn | undefined;
    for await (const event of state.client.stream({
      model: state.modelId,
      system: options.systemPrompt,
      messages: session.messages(),
      tools: options.toolset.specs,
      maxTokens: limits.maxOutputTokens,
      thinking: state.thinking,
      signal,
    })) {
      if (event.type === "text-delta") emit({ type: "text-delta", text: event.text });
      else if (event.type === "retry") emit(event);
      else if (event.type === "thinking-delta") {
        emit({ type: "thinking-delta", thinking: event.thinking });
      } else if (event.type === "done") turn = event.turn;
    }
    if (!turn)
      throw new ModelApiError("The model stream ended without a result.", { kind: "other" });
    return turn;
  };

  /** Compaction, or (if that fails or already ran) one reset; false when both are spent. */
  const recoverContext = async (reason: string): Promise<boolean> => {
    if (!state.compacted) {
      state.compacted = true;
      try {
        const result = await compactTranscript({
          model: state.client,
          modelId: state.modelId,
          transcript: session.transcript(),
          tools: options.toolset.specs,
          keepShare: options.compactionKeepShare,
          signal,
        });
        addUsage(result.usage);
        await session.appendCompaction(result.summary, result.firstKeptLine);
        emit({
          type: "compaction",
          summarizedMessages: result.summarizedMessages,
          keptMessages: result.keptMessages,
        });
        logger.info({ ...result, summary: undefined }, "compacted the session");
        return true;
      } catch (error) {
        checkAbort();
        logger.warn({ err: messageOf(error) }, "compaction failed; resetting the session");
      }
    }
    if (!state.reset) {
      state.reset = true;
      const notice =
        "The earlier conversation in this session was dropped: it no longer fit the model's " +
        `context window (${reason}) and could not be summarised. Continue from here` +
        (prompt ? " with the task below." : "; ask the user to restate the task if it is unclear.");
      await session.appendReset(notice);
      if (prompt) await session.append({ role: "user", content: prompt });
      emit({ type: "session-reset", reason });
      logger.warn({ reason }, "reset the session after a context overflow");
      return true;
    }
    return false;
  };

  /** Decides what a failed model call leads to: retry (return) or the end (throw RunStop). */
  const handleModelError = async (error: unknown): Promise<void> => {
    checkAbort();
    if (error instanceof AbortedError) checkAbort();
    const apiError =
      error instanceof ModelApiError
        ? error
        : new ModelApiError(`The model call failed: ${messageOf(error)}`, {
            kind: "other",
            cause: error,
          });
    logger.warn({ kind: apiError.kind, err: apiError.message }, "model call failed");

    if (apiError.kind === "context_overflow") {
      if (await recoverContext(apiError.message)) return;
      throw new RunStop(
        "context_overflow",
        "The conversation does not fit the model's context window, even after compacting it and resetting the session.",
        fixForKind("context_overflow"),
      );
    }
    if (apiError.transient && !state.retried) {
      state.retried = true;
      const delayMs = Math.min(
        apiError.retryAfterMs ?? options.retryDelayMs ?? 2000,
        options.maxRetryDelayMs ?? 60_000,
      );
      emit({
        type: "retry",
        reason: apiError.kind,
        status: apiError.status,
        delayMs,
        error: apiError.message,
      });
      try {
        await sleep(delayMs, signal);
      } catch {
        checkAbort();
      }
      return;
    }
    if (
      apiError.kind === "invalid_request" &&
      state.thinking &&
      !state.thinkingDowngraded &&
      /thinking/i.test(apiError.message)
    ) {
      state.thinkingDowngraded = true;
      state.thinking = undefined;
      emit({ type: "thinking-downgrade", error: apiError.message });
      return;
    }
    const canFallBack =
      apiError.kind !== "billing" && apiError.kind !== "auth" && state.fallbacks.length > 0;
    const next = canFallBack ? state.fallbacks.shift() : undefined;
    if (next) {
      emit({ type: "fallback", from: state.modelId, to: next.modelId, error: apiError.message });
      logger.warn({ from: state.modelId, to: next.modelId }, "falling back to another model");
      state.modelId = next.modelId;
      if (next.client) state.client = next.client;
      return;
    }
    throw new RunStop("model_error", sentence(apiError.message), apiError.fix);
  };

  /** Runs the turn's tool calls in order, appending each result before the next call. */
  const runTools = async (uses: ToolUseBlock[]): Promise<void> => {
    for (const [index, use] of uses.entries()) {
      checkAbort();
      if (!use.truncated) {
        emit({ type: "tool-call", toolCallId: use.id, name: use.name, input: use.input });
      }
      const result = await executeToolCall(options.toolset, use, signal);
      checkAbort(); // an aborted call is answered by the abort path, consistently
      await appendResult(use, result, use.truncated === true);
      const steering = options.steering?.drain() ?? [];
      if (steering.length > 0) {
        const rest = uses.slice(index + 1);
        for (const skipped of rest) {
          await appendResult(skipped, syntheticToolResult(skipped.id, steeringSkipReason), true);
        }
        for (const content of steering) await session.append({ role: "user", content });
        emit({ type: "steering", messages: steering.length, skippedToolCalls: rest.length });
        return;
      }
    }
  };

  const appendResult = async (
    use: ToolUseBlock,
    result: ToolResultBlock,
    skipped: boolean,
  ): Promise<void> => {
    await session.append({ role: "user", content: [result] });
    emit({
      type: "tool-result",
      toolCallId: use.id,
      name: use.name,
      isError: result.isError,
      content: result.content,
      skipped,
    });
  };

  const finish = (status: RunStatus, message?: string, fix?: string): RunResult => {
    const result: RunResult = {
      runId,
      sessionKey: session.sessionKey,
      status,
      exitCode: exitCodeForStatus(status),
      turns: state.turns,
      usage: { ...usage },
      finalText: state.finalText,
    };
    if (message !== undefined) result.message = message;
    if (fix !== undefined) result.fix = fix;
    return result;
  };

  emit({ type: "run-start", runId, sessionKey: session.sessionKey, model: state.modelId });
  let result: RunResult;
  try {
    checkAbort();
    if (prompt) await session.append({ role: "user", content: prompt });
    result = await innerLoop();
  } catch (error) {
    if (error instanceof RunStop) {
      result = finish(error.status, error.message, error.fix);
    } else {
      logger.error({ err: error }, "the run failed unexpectedly");
      result = finish(
        "internal_error",
        `The run failed unexpectedly: ${messageOf(error)}`,
        "This is a bug in cordon; please report it with the session file.",
      );
    }
  } finally {
    if (timer) clearTimeout(timer);
  }
  // Whatever stopped the run, every tool call in the session gets a result.
  try {
    await session.answerOpenToolUses(abortedToolReason);
  } catch (error) {
    logger.error({ err: error }, "could not record results for unfinished tool calls");
  }
  emit({ type: "run-end", ...result });
  return result;

  async function innerLoop(): Promise<RunResult> {
    for (;;) {
      checkAbort();
      if (state.turns >= limits.maxTurns) {
        throw new RunStop(
          "limit_turns",
          `The run stopped after ${limits.maxTurns} model turns without finishing.`,
          "Raise the limit with --max-turns, or continue with the same --session.",
        );
      }
      if (limits.maxTokens !== undefined) {
        const spent = usage.inputTokens + usage.outputTokens;
        if (spent >= limits.maxTokens) {
          throw new RunStop(
            "limit_tokens",
            `The run stopped after using ${spent} tokens, its budget is ${limits.maxTokens}.`,
            "Raise the token budget (limits.maxTokens), or continue with the same --session.",
          );
        }
      }

      let turn: ModelTurn;
      try {
        turn = await callModel();
      } catch (error) {
        await handleModelError(error);
        continue;
      }
      state.turns += 1;
      await session.append(turn.message, {
        model: turn.model,
        usage: turn.usage,
        stopReason: turn.stopReason,
      });
      addUsage(turn.usage);
      emit({
        type: "assistant-message",
        turn: state.turns,
        model: turn.model,
        message: turn.message,
        stopReason: turn.stopReason,
      });
      const text = textOf(turn.message);
      if (text !== "") state.finalText = text;

      const uses = turn.message.content.filter((b): b is ToolUseBlock => b.type === "tool_use");
      if (uses.length > 0) await runTools(uses);
      checkAbort();

      switch (turn.stopReason) {
        case "tool_use":
        case "pause_turn":
          continue;
        case "refusal":
          throw new RunStop(
            "refusal",
            "The model declined to continue with this request.",
            "Rephrase the task, or check that it is something the model may help with.",
          );
        case "max_tokens":
          if (uses.length > 0) continue; // the model saw why its call did not run; let it retry
          throw new RunStop(
            "limit_tokens",
            `The model's answer was cut off at the output limit of ${limits.maxOutputTokens} tokens.`,
            "Raise limits.maxOutputTokens, or ask for a shorter answer.",
          );
        case "model_context_window_exceeded":
          if (await recoverContext("the model's output reached the end of its context window")) {
            continue;
          }
          throw new RunStop(
            "context_overflow",
            "The conversation does not fit the model's context window, even after compacting it and resetting the session.",
            fixForKind("context_overflow"),
          );
        case "end_turn":
        case "stop_sequence": {
          if (uses.length > 0) continue; // tool calls always get a turn to read their results
          const followUps = [
            ...(options.steering?.drain() ?? []),
            ...(options.followUps?.drain() ?? []),
          ];
          if (followUps.length > 0) {
            for (const content of followUps) await session.append({ role: "user", content });
            emit({ type: "follow-up", messages: followUps.length });
            continue;
          }
          return finish("completed");
        }
      }
    }
  }
}

function textOf(message: AssistantMessage): string {
  return message.content
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("")
    .trim();
}

function formatDuration(ms: number): string {
  return ms >= 1000 ? `${Math.round(ms / 1000)} s` : `${ms} ms`;
}

function sentence(text: string): string {
  const trimmed = text.trim();
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
}
