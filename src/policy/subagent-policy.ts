import {
  normalizeAgentId,
  type CordonConfig,
  type SessionToolsVisibility,
} from "../config/index.js";
import type { SandboxMode } from "../sandbox/index.js";
import { resolveAgent, type ResolvedAgent } from "./resolve-agent.js";

/**
 * Subagents and the session tools (sessions_spawn, sessions_send, sessions_list,
 * sessions_history), decided here and nowhere else: whom a session may spawn, which sessions its
 * tools may see, and which agents' sessions it may reach. Pure, like the rest of the policy: the
 * plan carries what is decided, and the runner asks these functions with it.
 */

/** The subagent part of a run's plan (`RunPlan.subagents`), as `explain` prints it. */
export interface SubagentPlan {
  /** This session is a subagent's (`agent:<id>:sub:<id>`): it cannot spawn (one level deep). */
  isSubagentSession: boolean;
  /** Agent ids (normalised) this session may spawn; `*` is any agent. */
  allowAgents: string[];
  /** The key that decides them; named in every refusal. */
  allowAgentsKey: string;
  /** The model a child runs when the spawn names none (`subagents.model`); else its own. */
  model?: string | undefined;
  /** Child runs of one process at once (`agents.defaults.subagents.maxConcurrent`). */
  maxConcurrent: number;
  /**
   * Which sessions this session's tools see. Applies only when the session is sandboxed; an
   * unsandboxed session sees every session of its project (`all`).
   */
  visibility: SessionToolsVisibility;
  /** The key of `sandbox.sessionToolsVisibility` for this agent. */
  visibilityKey: string;
  agentToAgent: { enabled: boolean; allow: string[] };
  /** For each agent it may spawn (`*` expanded to agents.list): where its children would run. */
  targets: SubagentTarget[];
}

export interface SubagentTarget {
  agentId: string;
  /** Children of this agent are sandboxed (every subagent session is non-main: all but mode off). */
  sandboxed: boolean;
  mode: SandboxMode;
  modeKey: string;
  /** A sandboxed session may not start this child: it would run on the host. */
  refusedFromSandbox: boolean;
}

const subagentKeyPattern = /^agent:([^:]+):sub:(.+)$/s;

/** `agent:<child>:sub:<id>`: the session of one subagent run. */
export function subagentSessionKey(agentId: string, id: string): string {
  return `agent:${agentId}:sub:${id}`;
}

/** Whether a session key is a subagent's. */
export function isSubagentSessionKey(sessionKey: string): boolean {
  return subagentKeyPattern.test(sessionKey);
}

/** The agent id of a session key `agent:<id>:…`, or undefined. */
export function agentOfSessionKey(sessionKey: string): string | undefined {
  return /^agent:([^:]+):/.exec(sessionKey)?.[1];
}

/** The subagent part of a plan. `sandboxed` is the requesting session's own state. */
export function planSubagents(options: {
  config: CordonConfig;
  agent: ResolvedAgent;
  sessionKey: string;
  sandboxed: boolean;
}): SubagentPlan {
  const { config, agent, sessionKey, sandboxed } = options;
  const allowAgents = (agent.subagents.allowAgents ?? [agent.id]).map((id) =>
    id === "*" ? "*" : normalizeAgentId(id),
  );
  const listed = config.agents.list.map((entry) => normalizeAgentId(entry.id));
  const candidates = allowAgents.includes("*")
    ? [...new Set([agent.id, ...listed])]
    : [...new Set(allowAgents)];
  const targets: SubagentTarget[] = [];
  for (const id of candidates) {
    let target: ResolvedAgent;
    try {
      target = resolveAgent(config, id);
    } catch {
      continue; // an unknown id is refused when spawned, with the agents that exist
    }
    const mode = target.sandbox.mode;
    targets.push({
      agentId: target.id,
      sandboxed: mode !== "off",
      mode,
      modeKey: target.sandboxKey("mode"),
      refusedFromSandbox: mode === "off",
    });
  }
  return {
    isSubagentSession: isSubagentSessionKey(sessionKey),
    allowAgents,
    allowAgentsKey: agent.subagents.allowAgentsKey,
    model: agent.subagents.model,
    maxConcurrent: config.agents.defaults.subagents.maxConcurrent,
    visibility: agent.sandbox.sessionToolsVisibility,
    visibilityKey: agent.sandboxKey("sessionToolsVisibility"),
    agentToAgent: {
      enabled: config.tools.agentToAgent.enabled,
      allow: config.tools.agentToAgent.allow.map((id) => (id === "*" ? "*" : normalizeAgentId(id))),
    },
    targets: sandboxed ? targets : targets.map((t) => ({ ...t, refusedFromSandbox: false })),
  };
}

/** What the decisions below need of the requesting run's plan. */
export interface SessionRequester {
  agentId: string;
  sessionKey: string;
  sandboxed: boolean;
  subagents: SubagentPlan;
}

/**
 * Why this session may not spawn a subagent of `agentId` (normalised), or undefined when it may.
 * The answer names the key that decides it. Whether the child itself would be sandboxed is
 * checked on the child's own plan (`childSandboxRefusal`).
 */
export function spawnRefusal(requester: SessionRequester, agentId: string): string | undefined {
  const policy = requester.subagents;
  if (policy.isSubagentSession) {
    return `${requester.sessionKey} is a subagent's session, and a subagent cannot start subagents of its own (one level only). Do the work yourself, or report back to the session that started you.`;
  }
  if (policy.allowAgents.includes("*") || policy.allowAgents.includes(agentId)) return undefined;
  const allowed = policy.allowAgents.length > 0 ? policy.allowAgents.join(", ") : "none";
  return `Agent "${agentId}" is not one this session may start as a subagent (allowed: ${allowed}; set by ${policy.allowAgentsKey}). Spawn one of the allowed agents, or ask the user to add "${agentId}" to ${policy.allowAgentsKey}.`;
}

/**
 * A sandboxed session may not make a run happen on the host, by spawning a child whose agent is
 * unsandboxed or by messaging an unsandboxed session: that would be a way out of its sandbox.
 * `target` is the other session's own plan.
 */
export function childSandboxRefusal(
  requester: SessionRequester,
  target: { agentId: string; sessionKey?: string; sandboxed: boolean; modeKey: string },
  action: "spawn" | "send" = "spawn",
): string | undefined {
  if (!requester.sandboxed || target.sandboxed) return undefined;
  const subject =
    action === "spawn"
      ? `A subagent of "${target.agentId}" would run on the host`
      : `A message to ${target.sessionKey ?? "that session"} would make it run on the host`;
  return `${subject} (${target.modeKey} does not sandbox it), and this session is sandboxed: a sandboxed session cannot make anything run outside a sandbox.`;
}

/** A session the tools are asked about, and how it relates to the requester. */
export interface SessionTarget {
  sessionKey: string;
  /** This session spawned it (a run record says so). */
  spawnedByRequester: boolean;
}

/**
 * Why the requester's session tools may not see (list, read or message) `target`, or undefined.
 * A sandboxed session sees only the subagents it spawned unless `sandbox.sessionToolsVisibility`
 * is "all"; another agent's sessions need `tools.agentToAgent` (its own children excepted).
 */
export function visibilityRefusal(
  requester: SessionRequester,
  target: SessionTarget,
): string | undefined {
  if (target.sessionKey === requester.sessionKey || target.spawnedByRequester) return undefined;
  const policy = requester.subagents;
  if (requester.sandboxed && policy.visibility === "spawned") {
    return `Session ${target.sessionKey} is not visible here: this session is sandboxed and sees only the subagents it spawned (${policy.visibilityKey} is "spawned").`;
  }
  const agentId = agentOfSessionKey(target.sessionKey);
  if (agentId === undefined || agentId === requester.agentId) return undefined;
  if (!policy.agentToAgent.enabled) {
    return `Session ${target.sessionKey} belongs to agent "${agentId}", and sessions of other agents are off limits (tools.agentToAgent.enabled is false).`;
  }
  const allow = policy.agentToAgent.allow;
  if (allow.includes("*") || allow.includes(agentId)) return undefined;
  return `Session ${target.sessionKey} belongs to agent "${agentId}", which is not in tools.agentToAgent.allow (${allow.join(", ") || "empty"}).`;
}
