import type { Logger } from "../../common/index.js";
import type { RunResult } from "../loop/index.js";
import type { ModelClient } from "../model/index.js";
import type { RunPlan } from "../../policy/index.js";
import type { SandboxLease } from "../../sandbox/index.js";
import type { RunnerEvent } from "./run-task.js";
import type { SandboxProgress } from "./sandbox-provider.js";

/** What an agent runtime other than cordon's own loop gets for one run (docs/runtimes.md). */
export interface AgentRuntimeRun {
  runId: string;
  sessionKey: string;
  plan: RunPlan;
  /** The sandbox, acquired and seeded exactly as for cordon's own loop. */
  lease: SandboxLease;
  /** The task, as text. */
  prompt: string;
  /** `Date.now()` when the run began (its result's `durationMs` counts from here). */
  startedAt: number;
  /** The model the run names (`--model` or the agent's primary). */
  modelId: string;
  signal?: AbortSignal | undefined;
  /** Run events as cordon's loop emits them; `run-start` and `run-end` are runTask's. */
  emit: (event: RunnerEvent) => void;
  logger: Logger;
}

/**
 * An agent program that runs inside the sandbox in place of cordon's loop (`agents.*.runtime`):
 * cordon plans, acquires, seeds and releases; the runtime runs the agent and reports what it did
 * as cordon's events, ending with the run's result.
 */
export interface AgentRuntime {
  /** e.g. "claude-code", for messages. */
  readonly name: string;
  /**
   * Before the sandbox is acquired: fail early on what the run lacks (the host's credential).
   * The agent's image is the sandbox's (the plan names it; the sandbox layer builds it).
   */
  prepare?(options: {
    signal?: AbortSignal | undefined;
    onProgress: (progress: SandboxProgress) => void;
  }): Promise<void>;
  run(run: AgentRuntimeRun): Promise<RunResult>;
}

/** The model client of a run whose agent program calls the model itself: never called. */
export const agentRuntimeModel: ModelClient = {
  provider: "agent-runtime",
  stream: () => {
    throw new Error("an agent runtime other than cordon's calls its model itself");
  },
};
