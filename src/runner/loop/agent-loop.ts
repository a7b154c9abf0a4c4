import { randomUUID } from "node:crypto";
import {
  AbortedError,
  createSilentLogger,
  messageOf,
  sleep,
  type Logger,
} from "../../common/index.js";
import {
  CostMeter,
  emptyUsage,
  ModelApiError,
  type AssistantMessage,
  type Message,
  type ModelClient,
  type ModelTurn,
  type ToolResultBlock,
  type ToolUseBlock,
  type UserContentBlock,
} from "../model/index.js";
import { builtinLimits, type PlannedLimits } from "../../policy/index.js";
import type { AppendMeta, TranscriptItem } from "../session/index.js";
import { syntheticToolResult } from "../session/index.js";
import { compactTranscript, estimateRequestTokens, NothingToCompactError } from "./compaction.js";
import {
  defaultRecoveryLimits,
  nextRecovery,
  type Recovery,
  type RecoveryLimits,
  type RecoveryState,
} from "./recovery.js";
import { exitCodeForStatus, type RunEvent, type RunResult, type RunStatus } from "./run-events.js";
import type { MessageSource, RunIO } from "./run-io.js";
import { maxTokensFor, thinkingOptionsOf, type ThinkingSetting } from "./thinking.js";
import { executeToolCall, type RunnerToolset } from "./tool-executor.js";
import { ToolOutputStream } from "./tool-output.js";

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

/**
 * The loop's limits, as the plan decided them (`RunPlan.limits`, policy/run-limits.ts); one left
 * out is the built-in default there, for a caller that runs the loop without a plan.
 */
export type RunLimits = {
  [K in keyof Omit<PlannedLimits, "keys" | "thinking">]?: PlannedLimits[K] | undefined;
};

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
  /** A thinking level (stepped down one at a time if the API rejects it) or a raw budget. */
  thinking?: ThinkingSetting | undefined;
  /** The caller's signal, event sink and message sources. */
  io?: RunIO | undefined;
  /**
   * Awaited before a turn's tool calls run, with the run's turn number: the last moment the
   * workspace is as the turns before left it (a per-turn checkpoint is taken here). Must not
   * throw (a throw is logged, and the tools run all the same).
   */
  beforeToolCalls?: ((turn: number) => Promise<void>) | undefined;
  /**
   * Called once a turn's tool calls have all run and their results are in the session, with the
   * run's turn number: the moment the workspace is as this turn left it. Must return at once and
   * not throw (a throw is logged): work it starts runs beside the next model call, and the next
   * `beforeToolCalls` may wait for it.
   */
  afterToolCalls?: ((turn: number) => void) | undefined;
  logger?: Logger | undefined;
  runId?: string | undefined;
  /** Wait before the one retry of a transient model error, when the API gave none. Default 2000 ms. */
  retryDelayMs?: number | undefined;
  /** Longest wait we accept from a retry-after header, in ms. Default 60_000. */
  maxRetryDelayMs?: number | undefined;
  /**
   * Share of the transcript's tokens the first compaction keeps verbatim; each further attempt
   * keeps half as much. Default 0.3.
   */
  compactionKeepShare?: number | undefined;
  /**
   * When the run began (`Date.now()`), for the result's `durationMs`: a caller that waited for a
   * sandbox or a session lock first passes its own start. Default: when the loop starts.
   */
  startedAt?: number | undefined;
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

/** One run's state, shared by the step functions below; only they change it. */
interface LoopRun {
  readonly runId: string;
  readonly options: AgentLoopOptions;
  readonly session: LoopSession;
  readonly logger: Logger;
  readonly limits: {
    maxTurns: number;
    maxTokens: number | undefined;
    maxOutputTokens: number;
    timeoutMs: number | undefined;
    toolTimeoutMs: number;
    contextWindowTokens: number;
  };
  readonly recoveryLimits: RecoveryLimits;
  /** The caller's signal and the run's own timeout, combined. */
  readonly signal: AbortSignal;
  readonly timedOut: AbortSignal;
  readonly prompt: UserContentBlock[] | undefined;
  readonly usage: ReturnType<typeof emptyUsage>;
  /** Prices each call by the model that answered it. */
  readonly costs: CostMeter;
  /** `Date.now()` when the run began. */
  readonly startedAt: number;
  /** The model id the API reported for the last successful call. */
  answeredBy: string | undefined;
  readonly recovery: RecoveryState;
  turns: number;
  modelId: string;
  client: ModelClient;
  fallbacks: FallbackModel[];
  finalText: string;
  emit(event: RunEvent): void;
}

/**
 * The agent loop (DESIGN.md §6). Inner loop: stream the model, append the assistant message, run
 * its tool calls and append each result, repeat until the model stops or a limit hits. A failed
 * model call goes to `nextRecovery` (recovery.ts), which picks retry, fallback, compaction,
 * reset, a thinking step down or the end. Never throws: every outcome is a `RunResult`. The
 * run's start and end are announced by the orchestrator (run-task.ts), not here.
 */
export async function runAgentLoop(options: AgentLoopOptions): Promise<RunResult> {
  const timeout = new AbortController();
  const run = startRun(options, timeout.signal);
  const timer =
    run.limits.timeoutMs === undefined
      ? undefined
      : setTimeout(
          () => timeout.abort(new AbortedError("the run timed out")),
          run.limits.timeoutMs,
        );
  let result: RunResult;
  try {
    stopIfAborted(run);
    if (run.prompt) await run.session.append({ role: "user", content: run.prompt });
    result = await turnLoop(run);
  } catch (error) {
    result = resultOfError(run, error);
  } finally {
    if (timer) clearTimeout(timer);
  }
  // Whatever stopped the run, every tool call in the session gets a result.
  try {
    await run.session.answerOpenToolUses(abortedToolReason);
  } catch (error) {
    run.logger.error({ err: error }, "could not record results for unfinished tool calls");
  }
  return result;
}

function startRun(options: AgentLoopOptions, timedOut: AbortSignal): LoopRun {
  const runId = options.runId ?? randomUUID();
  const logger = (options.logger ?? createSilentLogger()).child({
    runId,
    sessionKey: options.session.sessionKey,
  });
  const prompt: UserContentBlock[] | undefined =
    options.prompt === undefined
      ? undefined
      : typeof options.prompt === "string"
        ? [{ type: "text", text: options.prompt }]
        : options.prompt;
  const fallbacks = [...(options.fallbackModels ?? [])];
  return {
    runId,
    options,
    session: options.session,
    logger,
    limits: {
      maxTurns: options.limits?.maxTurns ?? builtinLimits.maxTurns,
      maxTokens: options.limits?.maxTokens,
      maxOutputTokens: options.limits?.maxOutputTokens ?? builtinLimits.maxOutputTokens,
      timeoutMs: options.limits?.timeoutMs,
      toolTimeoutMs: options.limits?.toolTimeoutMs ?? builtinLimits.toolTimeoutMs,
      contextWindowTokens: options.limits?.contextWindowTokens ?? builtinLimits.contextWindowTokens,
    },
    recoveryLimits: {
      ...defaultRecoveryLimits,
      retryDelayMs: options.retryDelayMs ?? defaultRecoveryLimits.retryDelayMs,
      maxRetryDelayMs: options.maxRetryDelayMs ?? defaultRecoveryLimits.maxRetryDelayMs,
    },
    signal: options.io?.signal ? AbortSignal.any([options.io.signal, timedOut]) : timedOut,
    timedOut,
    prompt,
    usage: emptyUsage(),
    costs: new CostMeter(),
    startedAt: options.startedAt ?? Date.now(),
    answeredBy: undefined,
    recovery: {
      retried: false,
      thinking: options.thinking,
      compactions: 0,
      reset: false,
      fallbacksLeft: fallbacks.length,
    },
    turns: 0,
    modelId: options.modelId,
    client: options.model,
    fallbacks,
    finalText: "",
    emit(event) {
      try {
        options.io?.onEvent?.(event);
      } catch (error) {
        logger.warn({ err: error }, "an event listener threw; the run goes on");
      }
    },
  };
}

/** Model call, tool calls, next step; until a step returns the run's result. */
async function turnLoop(run: LoopRun): Promise<RunResult> {
  for (;;) {
    stopIfAborted(run);
    checkBudgets(run);
    // One copy of the transcript a turn: the estimate and the request read the same messages.
    const messages = run.session.messages();
    if (await compactedAhead(run, messages)) continue;
    let turn: ModelTurn;
    try {
      turn = await callModel(run, messages);
    } catch (error) {
      await recover(run, asModelError(run, error));
      continue;
    }
    await recordTurn(run, turn);
    const uses = turn.message.content.filter((b): b is ToolUseBlock => b.type === "tool_use");
    if (uses.length > 0) {
      await beforeToolCalls(run);
      await runToolCalls(run, uses);
      afterToolCalls(run);
    }
    stopIfAborted(run);
    const done = await afterTurn(run, turn, uses.length > 0);
    if (done) return done;
  }
}

function stopIfAborted(run: LoopRun): void {
  if (!run.signal.aborted) return;
  if (run.timedOut.aborted) {
    throw new RunStop(
      "timeout",
      `The run stopped after its time limit of ${formatDuration(run.limits.timeoutMs ?? 0)}.`,
      "Raise the limit with --timeout, or split the task into smaller runs.",
    );
  }
  throw new RunStop(
    "aborted",
    "The run was interrupted.",
    "Run again with the same --session to continue where it stopped.",
  );
}

/** The turn and token budgets, checked before each model call. */
function checkBudgets(run: LoopRun): void {
  if (run.turns >= run.limits.maxTurns) {
    throw new RunStop(
      "limit_turns",
      `The run stopped after ${run.limits.maxTurns} model turns without finishing.`,
      "Raise the limit with --max-turns, or continue with the same --session.",
    );
  }
  if (run.limits.maxTokens === undefined) return;
  const spent = run.usage.inputTokens + run.usage.outputTokens;
  if (spent >= run.limits.maxTokens) {
    throw new RunStop(
      "limit_tokens",
      `The run stopped after using ${spent} tokens, its budget is ${run.limits.maxTokens}.`,
      "Raise the token budget (the run request's limits.maxTokens), or continue with the same --session.",
    );
  }
}

/**
 * The guard before each call: when the request (estimated at four characters a token) and its
 * max_tokens would not fit the context window, recover as from an overflow (compact, then the
 * reset) before sending it. True when it recovered, so the loop estimates again.
 */
async function compactedAhead(run: LoopRun, messages: readonly Message[]): Promise<boolean> {
  const estimate = estimateRequestTokens({
    system: run.options.systemPrompt,
    tools: run.options.toolset.specs,
    messages,
  });
  const thinking = thinkingOptionsOf(run.recovery.thinking);
  const needed = estimate + maxTokensFor(run.limits.maxOutputTokens, thinking);
  if (needed <= run.limits.contextWindowTokens) return false;
  await recover(
    run,
    new ModelApiError(
      `the next request would need about ${needed} tokens, over the context window of ${run.limits.contextWindowTokens}`,
      { kind: "context_overflow" },
    ),
  );
  return true;
}

/** One model call, streamed; text and thinking deltas are emitted as they come. */
async function callModel(run: LoopRun, messages: readonly Message[]): Promise<ModelTurn> {
  run.emit({ type: "model-start", turn: run.turns + 1, model: run.modelId });
  const thinking = thinkingOptionsOf(run.recovery.thinking);
  let turn: ModelTurn | undefined;
  for await (const event of run.client.stream({
    model: run.modelId,
    system: run.options.systemPrompt,
    messages,
    tools: run.options.toolset.specs,
    maxTokens: maxTokensFor(run.limits.maxOutputTokens, thinking),
    thinking,
    signal: run.signal,
  })) {
    if (event.type === "text-delta") run.emit({ type: "text-delta", text: event.text });
    else if (event.type === "retry") run.emit(event);
    else if (event.type === "thinking-delta") {
      run.emit({ type: "thinking-delta", thinking: event.thinking });
    } else if (event.type === "done") turn = event.turn;
  }
  if (!turn) throw new ModelApiError("The model stream ended without a result.", { kind: "other" });
  return turn;
}

/** A failure of the model call as a ModelApiError; an abort ends the run instead. */
function asModelError(run: LoopRun, error: unknown): ModelApiError {
  stopIfAborted(run);
  if (error instanceof ModelApiError) return error;
  return new ModelApiError(`The model call failed: ${messageOf(error)}`, {
    kind: "other",
    cause: error,
  });
}

/** Appends the assistant message and accounts for it. */
async function recordTurn(run: LoopRun, turn: ModelTurn): Promise<void> {
  run.turns += 1;
  await run.session.append(turn.message, {
    model: turn.model,
    usage: turn.usage,
    stopReason: turn.stopReason,
  });
  addUsage(run, turn.usage, turn.model);
  run.answeredBy = turn.model;
  run.emit({
    type: "assistant-message",
    turn: run.turns,
    model: turn.model,
    message: turn.message,
    stopReason: turn.stopReason,
  });
  const text = textOf(turn.message);
  if (text !== "") run.finalText = text;
}

/** Counts one call's tokens, priced by `model`, the one that answered it. */
function addUsage(run: LoopRun, turn: ModelTurn["usage"], model: string): void {
  run.costs.add(model, turn);
  run.usage.inputTokens += turn.inputTokens;
  run.usage.outputTokens += turn.outputTokens;
  run.usage.cacheReadTokens = turn.cacheReadTokens;
  run.usage.cacheWriteTokens = turn.cacheWriteTokens;
  run.emit({ type: "usage", turn: { ...turn }, total: { ...run.usage } });
}

/**
 * Runs the turn's tool calls in order, appending each result before the next call. After each,
 * steering messages (if any) skip the rest of the turn's calls and go to the model next.
 */
async function runToolCalls(run: LoopRun, uses: ToolUseBlock[]): Promise<void> {
  for (const [index, use] of uses.entries()) {
    stopIfAborted(run);
    if (!use.truncated) {
      run.emit({ type: "tool-call", toolCallId: use.id, name: use.name, input: use.input });
    }
    const output = new ToolOutputStream({
      toolCallId: use.id,
      name: use.name,
      emit: (event) => run.emit(event),
    });
    const outcome = await executeToolCall(run.options.toolset, use, {
      signal: run.signal,
      timeoutMs: run.limits.toolTimeoutMs,
      onOutput: output.push,
    }).finally(() => output.close());
    stopIfAborted(run); // an aborted call is answered by the abort path, consistently
    if (outcome.timedOut) {
      run.emit({
        type: "tool-timeout",
        toolCallId: use.id,
        name: use.name,
        timeoutMs: run.limits.toolTimeoutMs,
      });
    }
    await appendToolResult(run, use, outcome.result, use.truncated === true);
    const steering = steeringMessages(run);
    if (steering.length > 0) {
      const rest = uses.slice(index + 1);
      for (const skipped of rest) {
        await appendToolResult(
          run,
          skipped,
          syntheticToolResult(skipped.id, steeringSkipReason),
          true,
        );
      }
      for (const content of steering) await run.session.append({ role: "user", content });
      run.emit({ type: "steering", messages: steering.length, skippedToolCalls: rest.length });
      return;
    }
  }
}

async function appendToolResult(
  run: LoopRun,
  use: ToolUseBlock,
  result: ToolResultBlock,
  skipped: boolean,
): Promise<void> {
  await run.session.append({ role: "user", content: [result] });
  run.emit({
    type: "tool-result",
    toolCallId: use.id,
    name: use.name,
    isError: result.isError,
    content: result.content,
    skipped,
  });
}

async function beforeToolCalls(run: LoopRun): Promise<void> {
  const hook = run.options.beforeToolCalls;
  if (!hook) return;
  try {
    await hook(run.turns);
  } catch (error) {
    run.logger.warn({ err: error }, "the before-tool-calls hook threw; the tools run all the same");
  }
}

function afterToolCalls(run: LoopRun): void {
  try {
    run.options.afterToolCalls?.(run.turns);
  } catch (error) {
    run.logger.warn({ err: error }, "the after-tool-calls hook threw; the run goes on");
  }
}

function steeringMessages(run: LoopRun): UserContentBlock[][] {
  return drain(run, run.options.io?.steering);
}

function followUpMessages(run: LoopRun): UserContentBlock[][] {
  return drain(run, run.options.io?.followUps);
}

function drain(run: LoopRun, source: MessageSource | undefined): UserContentBlock[][] {
  if (!source) return [];
  try {
    return source.drain();
  } catch (error) {
    run.logger.warn({ err: error }, "a message source threw; taken as no messages");
    return [];
  }
}

/**
 * What the turn's stop reason leads to: undefined to go on with another model call, or the
 * run's result. A tool call always gets a turn to read its result.
 */
async function afterTurn(
  run: LoopRun,
  turn: ModelTurn,
  hadToolCalls: boolean,
): Promise<RunResult | undefined> {
  switch (turn.stopReason) {
    case "tool_use":
    case "pause_turn":
      return undefined;
    case "refusal":
      throw new RunStop(
        "refusal",
        "The model declined to continue with this request.",
        "Rephrase the task, or check that it is something the model may help with.",
      );
    case "max_tokens":
      if (hadToolCalls) return undefined; // the model saw why its call did not run; let it retry
      throw new RunStop(
        "limit_tokens",
        `The model's answer was cut off at the output limit of ${run.limits.maxOutputTokens} tokens.`,
        "Raise limits.maxOutputTokens, or ask for a shorter answer.",
      );
    case "model_context_window_exceeded":
      await recover(
        run,
        new ModelApiError("the model's output reached the end of its context window", {
          kind: "context_overflow",
        }),
      );
      return undefined;
    case "end_turn":
    case "stop_sequence": {
      if (hadToolCalls) return undefined;
      const next = [...steeringMessages(run), ...followUpMessages(run)];
      if (next.length === 0) return finish(run, "completed");
      for (const content of next) await run.session.append({ role: "user", content });
      run.emit({ type: "follow-up", messages: next.length });
      return undefined;
    }
  }
}

/**
 * Recovers from a failed model call as `nextRecovery` decides, until a decision succeeds (the
 * loop then calls the model again) or is `fail` (the run ends). A failed compaction counts as an
 * attempt, so the next decision moves on (another attempt, then the reset).
 */
async function recover(run: LoopRun, error: ModelApiError): Promise<void> {
  run.logger.warn({ kind: error.kind, err: error.message }, "model call failed");
  for (;;) {
    const decision = nextRecovery(error, run.recovery, run.recoveryLimits);
    if (await applyRecovery(run, decision, error)) return;
  }
}

/** Carries out one recovery decision; false when it failed and the next one should be asked. */
async function applyRecovery(
  run: LoopRun,
  decision: Recovery,
  error: ModelApiError,
): Promise<boolean> {
  switch (decision.action) {
    case "retry":
      run.recovery.retried = true;
      run.emit({
        type: "retry",
        reason: error.kind,
        status: error.status,
        delayMs: decision.delayMs,
        error: error.message,
      });
      try {
        await sleep(decision.delayMs, run.signal);
      } catch {
        stopIfAborted(run);
      }
      return true;
    case "fallback": {
      const next = run.fallbacks.shift();
      run.recovery.fallbacksLeft = run.fallbacks.length;
      if (!next) return false;
      run.emit({ type: "fallback", from: run.modelId, to: next.modelId, error: error.message });
      run.logger.warn({ from: run.modelId, to: next.modelId }, "falling back to another model");
      run.modelId = next.modelId;
      if (next.client) run.client = next.client;
      return true;
    }
    case "downgrade-thinking":
      run.recovery.thinking = decision.to;
      run.emit({
        type: "thinking-downgrade",
        error: error.message,
        to: typeof decision.to === "string" ? decision.to : "off",
      });
      return true;
    case "compact":
      run.recovery.compactions += 1;
      return compact(run);
    case "reset":
      run.recovery.reset = true;
      await resetSession(run, error.message);
      return true;
    case "fail":
      throw new RunStop(decision.status, decision.message, decision.fix);
  }
}

/**
 * Summarises the older part of the session; false (logged) when that failed. Each attempt keeps
 * half as much verbatim as the last; when nothing older is left, later attempts are skipped.
 */
async function compact(run: LoopRun): Promise<boolean> {
  const attempt = run.recovery.compactions;
  const keepShare = (run.options.compactionKeepShare ?? 0.3) / 2 ** (attempt - 1);
  try {
    const result = await compactTranscript({
      model: run.client,
      modelId: run.modelId,
      transcript: run.session.transcript(),
      keepShare,
      contextWindowTokens: run.limits.contextWindowTokens,
      signal: run.signal,
    });
    addUsage(run, result.usage, run.modelId);
    await run.session.appendCompaction(result.summary, result.firstKeptLine);
    run.emit({
      type: "compaction",
      summarizedMessages: result.summarizedMessages,
      keptMessages: result.keptMessages,
      chunks: result.chunks,
      attempt,
    });
    run.logger.info({ ...result, summary: undefined }, "compacted the session");
    return true;
  } catch (error) {
    stopIfAborted(run);
    if (error instanceof NothingToCompactError) {
      run.recovery.compactions = run.recoveryLimits.maxCompactions;
    }
    run.logger.warn({ err: messageOf(error), attempt }, "compaction failed");
    return false;
  }
}

/**
 * Drops the session's history, telling the model why (the run's prompt is repeated after it) and
 * the user what happened and how to avoid it (the session-reset event).
 */
async function resetSession(run: LoopRun, reason: string): Promise<void> {
  const notice =
    "The earlier conversation in this session was dropped: it no longer fit the model's " +
    `context window (${reason}) and could not be summarised. Continue from here` +
    (run.prompt ? " with the task below." : "; ask the user to restate the task if it is unclear.");
  await run.session.appendReset(notice);
  if (run.prompt) await run.session.append({ role: "user", content: run.prompt });
  run.emit({
    type: "session-reset",
    reason,
    message:
      `The session's earlier conversation was dropped: it did not fit the model's context window ` +
      `(${reason}) and ${run.recovery.compactions > 0 ? "compacting it did not help" : "it could not be compacted"}; the model continues from the task alone. ` +
      "To avoid this, give long tasks a session of their own (--session NAME), keep AGENTS.md short, " +
      "and have commands print less (pipe long output to a file and read parts of it).",
  });
  run.logger.warn({ reason }, "reset the session after a context overflow");
}

function resultOfError(run: LoopRun, error: unknown): RunResult {
  if (error instanceof RunStop) return finish(run, error.status, error.message, error.fix);
  run.logger.error({ err: error }, "the run failed unexpectedly");
  return finish(
    run,
    "internal_error",
    `The run failed unexpectedly: ${messageOf(error)}`,
    "This is a bug in cordon; please report it with the session file.",
  );
}

function finish(run: LoopRun, status: RunStatus, message?: string, fix?: string): RunResult {
  const result: RunResult = {
    runId: run.runId,
    sessionKey: run.session.sessionKey,
    status,
    exitCode: exitCodeForStatus(status),
    turns: run.turns,
    usage: { ...run.usage },
    durationMs: Date.now() - run.startedAt,
    cost: run.costs.cost,
    finalText: run.finalText,
  };
  if (run.answeredBy !== undefined) result.model = run.answeredBy;
  if (message !== undefined) result.message = message;
  if (fix !== undefined) result.fix = fix;
  return result;
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
