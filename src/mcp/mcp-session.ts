import { randomUUID } from "node:crypto";

import { parsePatch, patchDigest, takeChanges } from "../changes/index.js";
import { CordonError, messageOf, type Logger } from "../common/index.js";
import { explainPlan, redactPlanSecrets, type RunPlan } from "../policy/index.js";
import type { SandboxLease } from "../sandbox/index.js";
import {
  RunEventsLog,
  ToolOutputStream,
  acquireSessionLock,
  bindToolset,
  describeHolder,
  executeToolCall,
  planEvent,
  runEndEvent,
  runStartEvent,
  turnlessRunResult,
  planToolset,
  sessionFiles,
  type PlanRequest,
  type Runner,
  type RunnerEvent,
  type RunnerToolset,
  type SessionLock,
} from "../runner/index.js";
import {
  builtinTools,
  sessionTools,
  type ModelToolSpec,
  type ToolDefinition,
  type ToolResult,
} from "../tools/index.js";

/**
 * The tools an MCP client can be offered: the built-in ones but the session tools, which start
 * runs of cordon's own loop through a host only an agent run has (a client agent is its own loop).
 */
const sessionToolNames = new Set(sessionTools.map((tool) => tool.name));
export const mcpToolDefinitions: readonly ToolDefinition[] = builtinTools().filter(
  (tool) => !sessionToolNames.has(tool.name),
);

/** The MCP client, from its `initialize` request. */
export interface McpClientInfo {
  name: string;
  version?: string | undefined;
}

export interface McpSessionOptions {
  runner: Runner;
  /** The agent and session the client works in; `sessionKey` is the name `cordon diff --session` takes. */
  request: PlanRequest;
  /** When another run holds the session: wait for it (default), or refuse the call (`--no-wait`). */
  waitForSession?: boolean | undefined;
  logger: Logger;
  /**
   * The flags that name this session to the CLI (`--session mcp-1a2b3c`, with `--agent`,
   * `--workspace`, `--config` as the server got them), for the review hint.
   */
  reviewFlags: string;
  /**
   * Called once the session has let its sandbox go, with the plan it ran on (`--rm` removes the
   * sandbox here); not called when no call ever acquired one.
   */
  afterClose?: ((plan: RunPlan) => Promise<void>) | undefined;
}

export interface McpCallOptions {
  /** Fired when the client cancels the request (or the server stops): the command is killed. */
  signal: AbortSignal;
  /** What the call is doing, for the client's progress notifications. */
  onProgress?: ((message: string) => void) | undefined;
}

/** What a call answers: a tool result, and whether the policy refused it. */
export type McpCallResult = ToolResult & { refused: boolean };

/** The sandbox, lock and toolset a session holds from its first call until it closes. */
interface Started {
  plan: RunPlan;
  lock: SessionLock;
  lease: SandboxLease;
  toolset: RunnerToolset;
}

/**
 * One MCP client's cordon session: the tools the policy allows it, run in exactly the sandbox
 * `cordon run` with the same agent and session gets. It is a run as far as the rest of cordon can
 * tell: from its first call it holds the session's lock (a second client of the session waits, as
 * a second `cordon run` does) and writes its calls to the session's events file, so `cordon ps`
 * and `cordon logs -f` show it. The sandbox is acquired on the first call and released, never
 * removed, by `close` (the client went away); review and apply stay with the person.
 */
export class McpSession {
  readonly #options: McpSessionOptions;
  readonly #runId = randomUUID();
  readonly #startedAt = Date.now();
  readonly #events: RunEventsLog;
  #plan: Promise<RunPlan> | undefined;
  #started: Promise<Started> | undefined;
  #client: McpClientInfo | undefined;
  #announced = false;
  #closed: Promise<void> | undefined;
  #inFlight = 0;

  constructor(options: McpSessionOptions) {
    this.#options = options;
    this.#events = new RunEventsLog(this.#runId, options.logger);
  }

  /** True while a call or a diff is being answered (an idle clock must not end the session). */
  get busy(): boolean {
    return this.#inFlight > 0;
  }

  get runId(): string {
    return this.#runId;
  }

  /** Names the client in the run's events (`cordon ps`); call before the first tool call. */
  setClient(client: McpClientInfo): void {
    this.#client = client;
  }

  /** The plan the session's calls run under (the one `cordon sandbox explain` prints). */
  plan(): Promise<RunPlan> {
    this.#plan ??= this.#options.runner.plan(this.#options.request);
    // A plan that failed (a config being fixed) is made again on the next request.
    this.#plan.catch(() => {
      this.#plan = undefined;
    });
    return this.#plan;
  }

  /** The tools the policy allows this session, with the input schemas an agent run offers. */
  async tools(): Promise<ModelToolSpec[]> {
    return planToolset(mcpToolDefinitions, await this.plan()).specs;
  }

  /** True when the session works on a seeded private copy, so it has a diff to show. */
  async hasChanges(): Promise<boolean> {
    const plan = await this.plan();
    return (
      plan.sandbox.enabled &&
      plan.sandbox.workspaceAccess === "none" &&
      plan.sandbox.spec?.seed === true &&
      plan.sandbox.spec.privateWorkspace !== undefined
    );
  }

  /**
   * Runs one tool call as the agent loop does: refused by the policy before anything starts, a
   * bad input or a failed command answered as an error result, stopped (its process tree killed)
   * when `signal` fires or `tools.callTimeoutSec` passes. Never throws.
   */
  async call(name: string, input: unknown, options: McpCallOptions): Promise<McpCallResult> {
    this.#inFlight += 1;
    try {
      return await this.#call(name, input, options);
    } finally {
      this.#inFlight -= 1;
    }
  }

  async #call(name: string, input: unknown, options: McpCallOptions): Promise<McpCallResult> {
    const toolCallId = `mcp_${randomUUID()}`;
    let plan: RunPlan;
    try {
      plan = await this.plan();
    } catch (error) {
      return {
        ...failure(`cordon could not plan this session: ${messageOf(error)}`),
        refused: false,
      };
    }
    this.#announce(plan);
    const fields: Record<string, unknown> =
      typeof input === "object" && input !== null && !Array.isArray(input)
        ? (input as Record<string, unknown>)
        : {};
    this.#emit({ type: "tool-call", toolCallId, name, input: fields });
    const refusal = planToolset(mcpToolDefinitions, plan).refusal(name);
    if (refusal !== undefined) {
      this.#emit(toolResult(toolCallId, name, failure(refusal)));
      return { ...failure(refusal), refused: true };
    }
    let started: Started;
    try {
      started = await this.#start(options);
    } catch (error) {
      const fix = CordonError.is(error) && error.fix ? ` ${error.fix}` : "";
      const result = failure(`${name} was not run: ${messageOf(error)}${fix}`);
      this.#emit(toolResult(toolCallId, name, result));
      return { ...result, refused: false };
    }
    const timeoutMs = started.plan.limits.toolTimeoutMs;
    // As in a run: the output as it comes is an event (logs -f, ps), and its last line is the
    // client's progress message.
    const output = new ToolOutputStream({
      toolCallId,
      name,
      emit: (event) => {
        this.#emit(event);
        if (event.lastLine) options.onProgress?.(`${name}: ${event.lastLine}`);
      },
    });
    const outcome = await executeToolCall(
      started.toolset,
      { type: "tool_use", id: toolCallId, name, input: fields },
      { signal: options.signal, timeoutMs, onOutput: output.push },
    ).finally(() => output.close());
    if (outcome.timedOut) this.#emit({ type: "tool-timeout", toolCallId, name, timeoutMs });
    const result: ToolResult = {
      content: outcome.result.content,
      isError: outcome.result.isError,
    };
    this.#emit(toolResult(toolCallId, name, result, options.signal.aborted));
    return { ...result, refused: false };
  }

  /** The plan as `cordon sandbox explain` prints it, credential-like values redacted. */
  async explain(): Promise<string> {
    const plan = await this.plan();
    return `${this.#reviewHint(plan)}\n\n${explainPlan(redactPlanSecrets(plan))}`;
  }

  /**
   * The changes the session made to its seeded copy so far, as the patch `cordon diff` would
   * show, with its sha256. Not recorded as shown: only what the person saw with `cordon diff`
   * may be applied without being shown again.
   */
  async diff(signal: AbortSignal): Promise<{ text: string; files: number; sha256: string }> {
    this.#inFlight += 1;
    try {
      return await this.#diff(signal);
    } finally {
      this.#inFlight -= 1;
    }
  }

  async #diff(signal: AbortSignal): Promise<{ text: string; files: number; sha256: string }> {
    const { lease, plan } = await this.#start({ signal });
    const patch = await takeChanges(lease, { signal });
    const files = parsePatch(patch).length;
    const sha256 = patchDigest(patch);
    const head =
      files === 0
        ? "no changes yet"
        : `${files} changed file${files === 1 ? "" : "s"}, sha256 ${sha256}`;
    const body = Buffer.from(patch).toString("utf8");
    return { text: `${head}\n${this.#reviewHint(plan)}\n\n${body}`, files, sha256 };
  }

  /**
   * Ends the session: the run-end is written, the sandbox released (the container stays, with
   * the work) and the session's lock let go. Idempotent.
   */
  close(status: "completed" | "aborted" = "completed"): Promise<void> {
    this.#closed ??= this.#close(status);
    return this.#closed;
  }

  async #close(status: "completed" | "aborted"): Promise<void> {
    const starting = this.#started;
    if (!starting) return;
    const started = await starting.catch(() => undefined);
    const plan = started?.plan ?? (await this.plan().catch(() => undefined));
    this.#emit(
      runEndEvent(
        turnlessRunResult({
          runId: this.#runId,
          sessionKey: plan?.sessionKey ?? "",
          status,
          startedAt: this.#startedAt,
        }),
      ),
    );
    if (!started) return;
    await this.#events.flushed();
    await started.lease.release().catch((error: unknown) => {
      this.#options.logger.warn({ err: error }, "releasing the sandbox failed");
    });
    await started.lock.release().catch((error: unknown) => {
      this.#options.logger.warn({ err: error }, "releasing the session lock failed");
    });
    await this.#options.afterClose?.(started.plan);
  }

  /** The run-start and plan events, once, before the session's first call. */
  #announce(plan: RunPlan): void {
    if (this.#announced) return;
    this.#announced = true;
    const client = this.#client
      ? `${this.#client.name}${this.#client.version ? ` ${this.#client.version}` : ""}`
      : "an MCP client";
    // Named for `cordon ps`; no model: the client has it.
    this.#emit(
      runStartEvent({ runId: this.#runId, sessionKey: plan.sessionKey, model: "", client }),
    );
    this.#emit(planEvent(plan, planToolset(mcpToolDefinitions, plan).names));
  }

  /** The session's lock, events file and sandbox, taken by the first call that needs them. */
  #start(options: Pick<McpCallOptions, "signal" | "onProgress">): Promise<Started> {
    if (this.#closed) return Promise.reject(new Error("the MCP session has ended"));
    this.#started ??= this.#acquire(options);
    // A start that failed (Docker down, the session busy with --no-wait) is tried again next call.
    this.#started.catch(() => {
      this.#started = undefined;
    });
    return this.#started;
  }

  async #acquire(options: Pick<McpCallOptions, "signal" | "onProgress">): Promise<Started> {
    const { runner, request, logger } = this.#options;
    const plan = await this.plan();
    this.#announce(plan);
    const lock = await acquireSessionLock({
      stateDir: runner.stateDir,
      sessionKey: plan.sessionKey,
      project: plan.agent.workspaceId,
      runId: this.#runId,
      agentId: plan.agent.id,
      workspace: plan.agent.workspace,
      wait: this.#options.waitForSession,
      signal: options.signal,
      onWait: (holder) => {
        this.#emit({
          type: "session-wait",
          sessionKey: plan.sessionKey,
          holder: { pid: holder.pid, host: holder.host, since: holder.since, runId: holder.runId },
        });
        options.onProgress?.(`waiting for session ${plan.sessionKey}: ${describeHolder(holder)}`);
      },
    });
    try {
      this.#events.attach(
        sessionFiles(runner.stateDir, plan.sessionKey, plan.agent.workspaceId).events,
      );
      const held = await runner.acquireSandbox({
        ...request,
        signal: options.signal,
        onProgress: (progress) => {
          this.#emit({ type: "sandbox-progress", ...progress });
          options.onProgress?.(progress.message);
        },
        onEgress: ({ host, port, allowed }) => this.#emit({ type: "egress", host, port, allowed }),
      });
      const { sandbox } = held.lease;
      this.#emit({
        type: "sandbox-ready",
        container: sandbox.id,
        kind: sandbox.kind,
        fresh: held.lease.fresh,
        detail: `${held.lease.fresh ? "new" : "reused"}, for an MCP client`,
        warnings: [...(held.lease.warnings ?? [])],
      });
      const toolset = bindToolset(mcpToolDefinitions, held.plan, sandbox, logger);
      return { plan: held.plan, lock, lease: held.lease, toolset };
    } catch (error) {
      await this.#events.flushed();
      await lock.release().catch(() => undefined);
      throw error;
    }
  }

  /** How the person reviews and applies what the client did, naming this session. */
  #reviewHint(plan: RunPlan): string {
    const flags = this.#options.reviewFlags;
    return `session ${plan.sessionKey}: the person reviews the changes with \`cordon diff ${flags}\` and applies them with \`cordon apply ${flags}\``;
  }

  #emit(event: RunnerEvent): void {
    this.#events.record(event);
  }
}

function failure(text: string): ToolResult {
  return { content: [{ type: "text", text }], isError: true };
}

function toolResult(
  toolCallId: string,
  name: string,
  result: ToolResult,
  skipped = false,
): RunnerEvent {
  return {
    type: "tool-result",
    toolCallId,
    name,
    isError: result.isError,
    content: result.content,
    skipped,
  };
}
