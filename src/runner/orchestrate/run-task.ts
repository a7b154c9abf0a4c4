import { randomUUID } from "node:crypto";

import {
  ExitCode,
  createSilentLogger,
  exitCodeOf,
  exitCodeOfAbort,
  messageOf,
  CordonError,
  systemErrorFix,
  type Logger,
} from "../../common/index.js";
import type { ModelGatewayCall, Sandbox, SandboxLease } from "../../sandbox/index.js";
import {
  createToolset,
  type SessionToolHost,
  type ToolDefinition,
  type Toolset,
} from "../../tools/index.js";
import {
  exitCodeForStatus,
  runAgentLoop,
  buildSystemPrompt,
  type RunEvent,
  type RunIO,
  type RunResult,
  type RunStatus,
  type RunnerToolset,
  type SandboxFacts,
} from "../loop/index.js";
import type { ModelClient, UserContentBlock } from "../model/index.js";
import {
  JsonlSession,
  RunEventsLog,
  SessionLanes,
  acquireSessionLock,
  sessionFiles,
  type SessionLockHolder,
} from "../session/index.js";
import { agentMountPath, readBootstrapFiles } from "./bootstrap-files.js";
import type { RunPlan } from "../../policy/index.js";
import { refusalFor } from "./tool-refusal.js";
import { runEndEvent, runStartEvent } from "./run-frame.js";
import type { SandboxProvider } from "./sandbox-provider.js";
import { agentRuntimeModel, type AgentRuntime } from "./agent-runtime.js";
import {
  turnCheckpointHooks,
  type TurnCheckpointEvent,
  type TurnCheckpointHooks,
} from "./turn-checkpoints.js";

/** Events of a whole run: the loop's, plus the orchestrator's own before the loop starts. */
export type RunnerEvent =
  | RunEvent
  | {
      type: "plan";
      agentId: string;
      /** The agent workspace on the host. */
      workspace: string;
      sandboxed: boolean;
      reason: string;
      workspaceAccess: string;
      tools: string[];
      warnings: string[];
    }
  | { type: "sandbox-progress"; phase: string; message: string }
  /** Another run (maybe in another process) holds the session; this one waits for it. */
  | {
      type: "session-wait";
      sessionKey: string;
      holder: Pick<SessionLockHolder, "pid" | "host" | "since" | "runId">;
    }
  /**
   * A call the agent made through cordon's model gateway (docs/runtimes.md): forwarded with the
   * real key (`status` is the API's), or refused by the gateway (`refused` says why).
   */
  | ({ type: "model-gateway" } & ModelGatewayCall)
  /**
   * A request the sandbox's egress proxy admitted or refused (docs/network.md); `phase: "setup"`
   * for the setup command's own sandbox.
   */
  | { type: "egress"; host: string; port: number; allowed: boolean; phase?: "setup" | undefined }
  /** The run's setup command (`--setup-cmd`) starts, in a container of its own, before the agent's. */
  | { type: "setup-start"; command: string }
  /** The seeded copy recorded before a turn's tools ran (`sandbox.checkpoints`), or why not. */
  | TurnCheckpointEvent
  /**
   * An event of a run this run started through a session tool (a subagent, or a message sent to
   * another session), nested whole; `childRunId` is set on the child's run-start.
   */
  | {
      type: "subagent";
      sessionKey: string;
      agentId: string;
      label?: string | undefined;
      /** The tool call (sessions_spawn / sessions_send) that started the child. */
      toolCallId: string;
      childRunId?: string | undefined;
      event: RunnerEvent;
    }
  | {
      type: "sandbox-ready";
      container: string;
      kind: "docker" | "host";
      fresh: boolean;
      detail: string;
      warnings: string[];
    };

/**
 * The `plan` event of a run: what it was decided to be. `tools` are those offered, by default
 * the plan's allowed ones (an MCP session offers fewer).
 */
export function planEvent(
  plan: RunPlan,
  tools: readonly string[] = plan.tools.allowed,
): Extract<RunnerEvent, { type: "plan" }> {
  return {
    type: "plan",
    agentId: plan.agent.id,
    workspace: plan.agent.workspace,
    sandboxed: plan.sandbox.enabled,
    reason: plan.sandbox.reason,
    workspaceAccess: plan.sandbox.workspaceAccess,
    tools: [...tools],
    warnings: [...plan.warnings],
  };
}

export interface RunTaskOptions {
  /** The plan, or how to make it: a failure to plan still ends as one run-start … run-end. */
  plan: RunPlan | (() => Promise<RunPlan>);
  /** The model client, or how to make it (a missing API key fails here, as a result). */
  model: ModelClient | (() => Promise<ModelClient>);
  /** Overrides the plan's primary model (e.g. `--model`). */
  modelId?: string | undefined;
  /** The session asked for, shown in run-start/run-end when planning fails. Default "". */
  requestedSessionKey?: string | undefined;
  sandboxes: SandboxProvider;
  /** Every registered tool; the plan decides which are offered. */
  tools: readonly ToolDefinition[];
  /** cordon's state directory (sessions live under it). */
  stateDir: string;
  prompt: string | UserContentBlock[];
  /** The caller's signal, event sink and message sources, passed on to the loop. */
  io?: RunIO<RunnerEvent> | undefined;
  logger?: Logger | undefined;
  /**
   * When another process's run holds the session: wait for it (default), or end at once with
   * exit code 3 (`cordon run --no-wait`).
   */
  waitForSession?: boolean | undefined;
  /** Serialises runs per session and bounds concurrent runs; default: a private one. */
  lanes?: SessionLanes | undefined;
  runId?: string | undefined;
  /** e.g. "cordon 0.1.0", for the system prompt. */
  agentName?: string | undefined;
  /**
   * The host of the session tools for this run (subagents, messages to other sessions), made
   * from the run's plan, id and event stream; none: the session tools refuse.
   */
  sessionHost?:
    | ((run: {
        plan: RunPlan;
        runId: string;
        emit: (event: RunnerEvent) => void;
      }) => SessionToolHost | undefined)
    | undefined;
  /**
   * Another agent program run in the sandbox instead of cordon's loop (`agents.*.runtime`), or
   * how to choose it from the plan; `model` and `tools` are then unused.
   */
  agentRuntime?: AgentRuntime | ((plan: RunPlan) => Promise<AgentRuntime | undefined>) | undefined;
  /**
   * A phase run under the session's lock before the agent's sandbox is acquired (the setup
   * command, setup-phase.ts); what it throws ends the run as a failure before the loop.
   */
  setup?: ((run: { emit: (event: RunnerEvent) => void }) => Promise<void>) | undefined;
}

/**
 * One run, end to end: make the plan, wait for the session's lane, acquire the sandbox, offer the
 * allowed tools, open the session, build the system prompt, drive the loop, release. Never throws:
 * a failure before the loop (no plan, sandbox down, session unreadable) ends as a `RunResult`
 * with its exit code. This is the one layer that announces runs: every run's events start with
 * one `run-start` and end with one `run-end`, whatever runtime drives the turns.
 */
export async function runTask(options: RunTaskOptions): Promise<RunResult> {
  // The run's duration counts planning, the wait for the session and the sandbox's start.
  const startedAt = Date.now();
  const signal = options.io?.signal;
  const runId = options.runId ?? randomUUID();
  const logger = (options.logger ?? createSilentLogger()).child({ runId });
  // The session's events file, for `cordon logs` and `cordon ps`; written once the lock is held.
  const eventsLog = new RunEventsLog(runId, logger);
  const emit = (event: RunnerEvent): void => {
    eventsLog.record(event);
    try {
      options.io?.onEvent?.(event);
    } catch (error) {
      logger.warn({ err: error }, "an event listener threw; the run goes on");
    }
  };

  let plan: RunPlan;
  let model: ModelClient;
  let agentRuntime: AgentRuntime | undefined;
  try {
    plan = typeof options.plan === "function" ? await options.plan() : options.plan;
    agentRuntime =
      typeof options.agentRuntime === "function"
        ? await options.agentRuntime(plan)
        : options.agentRuntime;
    // Another agent program calls its model itself (Claude Code: through the model gateway).
    if (agentRuntime) model = agentRuntimeModel;
    else model = typeof options.model === "function" ? await options.model() : options.model;
  } catch (error) {
    return endBeforeStart(error, {
      runId,
      sessionKey: options.requestedSessionKey ?? "",
      modelId: options.modelId,
      startedAt,
      emit,
      logger,
      signal,
    });
  }
  const modelId = options.modelId ?? plan.agent.model.primary;
  emit(runStartEvent({ runId, sessionKey: plan.sessionKey, model: modelId }));
  emit(planEvent(plan));

  const run: RunContext = {
    runId,
    plan,
    model,
    modelId,
    emit,
    logger,
    eventsLog,
    startedAt,
    agentRuntime,
    signal,
  };
  const lanes = options.lanes ?? new SessionLanes();
  try {
    return await lanes.run(plan.sessionKey, () => runInLane(options, run), signal);
  } catch (error) {
    // The lane or the session lock failed (interrupted while waiting, --no-wait).
    return endRun(failedRunResult(runId, plan.sessionKey, error, startedAt), {
      emit,
      logger,
      signal,
      error,
    });
  }
}

/**
 * A run that failed before it could begin: its prompt could not be read, its setup command
 * failed, or, in `runTask`, it could not be planned. Nothing ran, yet it is framed as every run
 * is — one `run-start`, one `run-end` — so every consumer sees the outcome.
 */
export function failedRun(options: {
  error: unknown;
  /** The session asked for, as given (it may not have been normalised yet). Default "". */
  sessionKey?: string | undefined;
  onEvent?: ((event: RunnerEvent) => void) | undefined;
  signal?: AbortSignal | undefined;
  logger?: Logger | undefined;
}): RunResult {
  const runId = randomUUID();
  const logger = (options.logger ?? createSilentLogger()).child({ runId });
  return endBeforeStart(options.error, {
    runId,
    sessionKey: options.sessionKey ?? "",
    modelId: undefined,
    startedAt: Date.now(),
    emit: (event) => {
      try {
        options.onEvent?.(event);
      } catch (error) {
        logger.warn({ err: error }, "an event listener threw; the run goes on");
      }
    },
    logger,
    signal: options.signal,
  });
}

function endBeforeStart(
  error: unknown,
  run: {
    runId: string;
    sessionKey: string;
    modelId: string | undefined;
    startedAt: number;
    emit: (event: RunnerEvent) => void;
    logger: Logger;
    signal: AbortSignal | undefined;
  },
): RunResult {
  run.emit(
    runStartEvent({ runId: run.runId, sessionKey: run.sessionKey, model: run.modelId ?? "" }),
  );
  return endRun(failedRunResult(run.runId, run.sessionKey, error, run.startedAt), {
    emit: run.emit,
    logger: run.logger,
    signal: run.signal,
    error,
  });
}

/**
 * Announces the run's end (the one `run-end`) and returns its result. A run its caller aborted
 * reports the code of what aborted it (143 for SIGTERM), the code the process exits with.
 */
function endRun(
  ended: RunResult,
  how: {
    emit: (event: RunnerEvent) => void;
    logger: Logger;
    signal: AbortSignal | undefined;
    error?: unknown;
  },
): RunResult {
  if (how.error !== undefined) {
    how.logger.debug({ err: how.error }, "run failed before the agent loop");
  }
  const result =
    ended.status === "aborted" ? { ...ended, exitCode: exitCodeOfAbort(how.signal) } : ended;
  how.emit(runEndEvent(result));
  return result;
}

interface RunContext {
  runId: string;
  plan: RunPlan;
  model: ModelClient;
  modelId: string;
  emit: (event: RunnerEvent) => void;
  logger: Logger;
  eventsLog: RunEventsLog;
  /** `Date.now()` when the run began. */
  startedAt: number;
  agentRuntime: AgentRuntime | undefined;
  signal: AbortSignal | undefined;
}

async function runInLane(options: RunTaskOptions, run: RunContext): Promise<RunResult> {
  const { runId, plan, emit, logger } = run;
  // Lanes order the runs of this process; the lock orders them across processes. It is taken
  // before the session is opened: opening repairs tool calls left without a result, which would
  // otherwise answer a live run's in-flight call as interrupted.
  const lock = await acquireSessionLock({
    stateDir: options.stateDir,
    sessionKey: plan.sessionKey,
    project: plan.agent.workspaceId,
    runId,
    agentId: plan.agent.id,
    workspace: plan.agent.workspace,
    wait: options.waitForSession,
    signal: run.signal,
    onWait: (holder) =>
      emit({
        type: "session-wait",
        sessionKey: plan.sessionKey,
        holder: { pid: holder.pid, host: holder.host, since: holder.since, runId: holder.runId },
      }),
  });
  try {
    run.eventsLog.attach(
      sessionFiles(options.stateDir, plan.sessionKey, plan.agent.workspaceId).events,
    );
    // Ended here, under the lock, so the run-end is in the events file too.
    let result: RunResult;
    let failure: unknown;
    try {
      result = await runLocked(options, run);
    } catch (error) {
      failure = error;
      result = failedRunResult(runId, plan.sessionKey, error, run.startedAt);
    }
    return endRun(result, { emit, logger, signal: run.signal, error: failure });
  } finally {
    await run.eventsLog.flushed();
    await lock.release().catch((error: unknown) => {
      logger.warn({ err: error }, "releasing the session lock failed");
    });
  }
}

async function runLocked(options: RunTaskOptions, run: RunContext): Promise<RunResult> {
  const { runId, plan, modelId, emit, logger } = run;
  await options.setup?.({ emit });
  await run.agentRuntime?.prepare?.({
    signal: run.signal,
    onProgress: (progress) => emit({ type: "sandbox-progress", ...progress }),
  });
  const lease = await options.sandboxes.acquire(plan, {
    signal: run.signal,
    onProgress: (progress) => emit({ type: "sandbox-progress", ...progress }),
    onEgress: ({ host, port, allowed }) => emit({ type: "egress", host, port, allowed }),
  });
  let session: JsonlSession | undefined;
  let checkpoints: TurnCheckpointHooks | undefined;
  try {
    const sandbox = lease.sandbox;
    emit({
      type: "sandbox-ready",
      container: sandbox.id,
      kind: sandbox.kind,
      fresh: lease.fresh,
      detail: describeSandbox(plan, lease),
      warnings: [...(lease.warnings ?? [])],
    });
    if (run.agentRuntime) {
      return await run.agentRuntime.run({
        runId,
        sessionKey: plan.sessionKey,
        plan,
        lease,
        startedAt: run.startedAt,
        prompt: promptText(options.prompt),
        modelId,
        signal: run.signal,
        emit,
        logger,
      });
    }
    const toolset = bindToolset(
      options.tools,
      plan,
      sandbox,
      logger,
      options.sessionHost?.({ plan, runId, emit }),
    );
    session = await JsonlSession.open({
      stateDir: options.stateDir,
      sessionKey: plan.sessionKey,
      project: plan.agent.workspaceId,
      logger,
      signal: run.signal,
    });
    const systemPrompt = buildSystemPrompt({
      runtime: {
        agentName: options.agentName,
        model: modelId,
        date: new Date().toISOString().slice(0, 10),
      },
      sandbox: sandboxFacts(plan, sandbox),
      tools: toolset.specs.map((spec) => ({ name: spec.name, description: spec.description })),
      mode: plan.agent.promptMode,
      bootstrapFiles: await readBootstrapFiles(plan, sandbox, run.signal),
    });
    // The first record (the copy as this run finds it) starts here, beside the first model call.
    checkpoints = turnCheckpointHooks({ plan, lease, emit, logger, signal: options.io?.signal });
    return await runAgentLoop({
      model: run.model,
      modelId,
      fallbackModels: plan.agent.model.fallbacks
        .filter((fallback) => fallback !== modelId)
        .map((fallback) => ({ modelId: fallback })),
      toolset,
      session,
      systemPrompt,
      prompt: options.prompt,
      limits: plan.limits,
      thinking: plan.limits.thinking,
      // The caller's io, with the sink that also writes the session's events file.
      io: { ...options.io, onEvent: emit },
      logger,
      runId,
      beforeToolCalls: checkpoints?.beforeToolCalls,
      afterToolCalls: checkpoints?.afterToolCalls,
      startedAt: run.startedAt,
    });
  } finally {
    // A record still reading the copy ends before the sandbox is let go.
    await checkpoints?.settle();
    await session?.close().catch((error: unknown) => {
      logger.warn({ err: error }, "closing the session failed");
    });
    await lease.release().catch((error: unknown) => {
      logger.warn({ err: error }, "releasing the sandbox failed");
    });
  }
}

/**
 * The tools module's toolset, bound to this run's sandbox, in the shape the loop calls: only the
 * plan's allowed tools are offered, and the toolset's `refusal` (made from the plan) is the one
 * decision whether a call may run; a refused call gets the config key that blocks it.
 */
export function bindToolset(
  tools: readonly ToolDefinition[],
  plan: RunPlan,
  sandbox: Sandbox,
  logger: Logger,
  sessions?: SessionToolHost,
): RunnerToolset {
  const toolset = planToolset(tools, plan);
  return {
    specs: toolset.specs,
    refusal: (name) => toolset.refusal(name),
    call: (name, input, context) =>
      toolset.call(name, input, {
        sandbox,
        signal: context.signal,
        logger,
        toolCallId: context.toolCallId,
        onOutput: context.onOutput,
        sessions,
      }),
  };
}

/** The registered tools as the plan allows them (no sandbox yet: `refusal` needs none). */
export function planToolset(tools: readonly ToolDefinition[], plan: RunPlan): Toolset {
  return createToolset({
    tools,
    allowed: plan.tools.allowed,
    refusal: (name) => refusalFor(plan, name),
  });
}

function sandboxFacts(plan: RunPlan, sandbox: Sandbox): SandboxFacts {
  const network = plan.sandbox.spec?.docker.network ?? "host";
  return {
    sandboxed: plan.sandbox.enabled,
    mode: plan.sandbox.mode,
    workspaceAccess: plan.sandbox.workspaceAccess,
    // An egress proxy (forwarded into a sandbox of network "none") is a network to the agent.
    network: plan.sandbox.enabled ? network !== "none" || !!plan.sandbox.spec?.egress : true,
    workdir: sandbox.workdir,
    readOnlyWorkspacePath:
      plan.sandbox.enabled && plan.sandbox.workspaceAccess === "ro"
        ? agentMountPath(plan)
        : undefined,
  };
}

function describeSandbox(plan: RunPlan, lease: SandboxLease): string {
  if (!plan.sandbox.enabled || !plan.sandbox.spec) {
    return `host, confined to the workspace (${plan.sandbox.reason})`;
  }
  const spec = plan.sandbox.spec;
  const access =
    spec.workspaceAccess === "none" && spec.seed ? "none, seeded copy" : spec.workspaceAccess;
  const state = lease.fresh ? "new" : "reused";
  return `${state}, scope ${spec.scope}, workspace ${access}, network ${spec.docker.network}`;
}

/** The task as text, for an agent program that takes text (images are left out). */
function promptText(prompt: string | UserContentBlock[]): string {
  if (typeof prompt === "string") return prompt;
  return prompt.flatMap((block) => (block.type === "text" ? [block.text] : [])).join("\n\n");
}

/**
 * A run that ended before the loop: its status follows the error's exit code. `startedAt`
 * (`Date.now()` when the run began) gives its duration; 0 without it.
 */
export function failedRunResult(
  runId: string,
  sessionKey: string,
  error: unknown,
  startedAt?: number,
): RunResult {
  const status = statusForError(error);
  return {
    runId,
    sessionKey,
    status,
    exitCode: exitCodeForStatus(status),
    turns: 0,
    usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
    durationMs: startedAt === undefined ? 0 : Date.now() - startedAt,
    cost: { usd: 0 },
    finalText: "",
    message: messageOf(error),
    fix:
      (CordonError.is(error) ? error.fix : undefined) ??
      systemErrorFix(error) ??
      "Set CORDON_DEBUG=1 and run again for details.",
  };
}

function statusForError(error: unknown): RunStatus {
  switch (exitCodeOf(error)) {
    case ExitCode.usage:
      return "config_error";
    case ExitCode.sandbox:
      return "sandbox_error";
    // A run's one environment failure is its setup command (`EnvironmentError` from `run`).
    case ExitCode.environment:
      return "setup_failed";
    case ExitCode.policy:
      return "policy_blocked";
    case ExitCode.model:
      return "model_error";
    case ExitCode.timeout:
      return "timeout";
    case ExitCode.interrupted:
      return "aborted";
    default:
      return "internal_error";
  }
}
