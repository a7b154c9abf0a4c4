import type { SystemPromptMode } from "../loop/index.js";
import type { SandboxMode, SandboxSpec, WorkspaceAccess } from "../../sandbox/index.js";
import type { PlannedLimits, PlannedRuntime, SubagentPlan } from "../../policy/index.js";

/**
 * The part of the policy layer's `RunPlan` the runner reads. Declared here, structurally, so the
 * orchestration depends on what it uses and not on how the plan is made: `planRun()` output fits
 * it, and embedders or tests can hand-build one.
 */
export interface PlannedRun {
  agent: {
    id: string;
    /** Absolute host path; never shown to the model when the run is sandboxed. */
    workspace: string;
    /** The project (see `RunPlan`); transcripts are kept per project. Hand-built plans may omit it. */
    workspaceId?: string | undefined;
    model: { primary: string; fallbacks: readonly string[] };
    /** How much the system prompt says (`agents.*.promptMode`); default full. */
    promptMode?: SystemPromptMode | undefined;
    /** Workspace files read into the prompt and the most bytes of each; default the built-in set. */
    bootstrap?: { files: readonly string[]; maxBytes: number } | undefined;
    /** The agent program (`RunPlan`); a hand-built plan without one runs cordon's loop. */
    runtime?: PlannedRuntime | undefined;
  };
  sessionKey: string;
  sandbox: {
    enabled: boolean;
    /** Why the run is (or is not) sandboxed, as a sentence. */
    reason: string;
    mode: SandboxMode;
    workspaceAccess: WorkspaceAccess;
    /** Present exactly when `enabled`. */
    spec?: SandboxSpec | undefined;
    /** Idle and age limits of this agent's sandboxes (ms; 0 = none), applied when acquiring. */
    prune?: { stopIdleMs?: number; idleMs: number; maxAgeMs: number } | undefined;
    /** The warm pool for sandboxes of this shape (`sandbox.pool`); unset = none. */
    pool?: { size: number } | undefined;
    /** The config key that decided `mode`, named when a subagent would leave the sandbox. */
    keys?: { mode: string } | undefined;
  };
  tools: {
    allowed: readonly string[];
    decisions: readonly PlannedToolDecision[];
  };
  /** The run's limits, decided in the plan (policy/run-limits.ts). */
  limits: PlannedLimits;
  /**
   * Whom the session may spawn and what its session tools see; without it (a hand-built plan)
   * the session tools refuse everything.
   */
  subagents?: SubagentPlan | undefined;
  warnings: readonly string[];
}

export interface PlannedToolDecision {
  tool: string;
  allowed: boolean;
  /** The config key that decided it, e.g. `agents.list[0].tools.deny`. */
  configKey?: string | undefined;
  reason?: string | undefined;
}

/** The message a model gets when it calls a tool the plan does not allow. */
export function refusalFor(plan: PlannedRun, tool: string): string {
  const decision = plan.tools.decisions.find((entry) => entry.tool === tool && !entry.allowed);
  const because = decision?.reason ? `: ${decision.reason}` : "";
  const key = decision?.configKey ? ` (set by ${decision.configKey})` : "";
  return `The tool "${tool}" is not allowed in this run by policy${because}${key}. Use one of the tools you were given.`;
}
