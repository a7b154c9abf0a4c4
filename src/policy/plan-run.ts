import path from "node:path";

import { ConfigError, PolicyDeniedError } from "../common/index.js";
import type { ConfigIssue, CordonConfig, PromptMode, ThinkingLevel } from "../config/index.js";
import { normalizeCarryPath } from "../config/index.js";
import type { SandboxMode, SandboxScope, SandboxSpec, WorkspaceAccess } from "../sandbox/index.js";
import { hashOf } from "../common/index.js";
import { containerNameOf, scopeKeyOf, workspaceIdOf } from "./container-name.js";
import { planCarry } from "./carry.js";
import { resolveDiskBudget } from "./disk-budget.js";
import { resolveDockerSettings } from "./docker-settings.js";
import { planProjectImage } from "./project-image.js";
import { planEgress } from "./egress.js";
import { withOfflineDefaults } from "./offline-defaults.js";
import { planMounts, type HostEntryKind } from "./mount-plan.js";
import {
  isWithin,
  normalizeAbsolute,
  protectedPathProblem,
  protectedPaths,
  safeRealpath,
} from "./path-guard.js";
import { SandboxSettingsRefusedError } from "./policy-errors.js";
import { resolveAgent, type ResolvedAgent } from "./resolve-agent.js";
import { mainSessionKey, normalizeSessionKey } from "./session-key.js";
import { isSubagentSessionKey, planSubagents, type SubagentPlan } from "./subagent-policy.js";
import { builtinToolCatalog, type ToolCatalog } from "./tool-catalog.js";
import {
  evaluateToolPolicy,
  type ToolDecision,
  type ToolEntries,
  type ToolPolicyLayer,
} from "./tool-policy.js";

export interface PlanRunInput {
  config: CordonConfig;
  /** Default: the `default: true` agent, else the first in agents.list, else `main`. */
  agentId?: string | undefined;
  /** Default `agent:<id>:main`; a bare name `x` becomes `agent:<id>:x`. */
  sessionKey?: string | undefined;
  /** cordon's state directory (private workspaces live under it). */
  stateDir: string;
  homeDir: string;
  /** Resolves symlinks on the host; injected so policy stays pure. */
  realpath: (p: string) => string;
  /**
   * What is at a host path, without following a final symlink (lstat); undefined when nothing is.
   * Injected like realpath; decides how the repository's `.git` is protected in `rw` mode.
   */
  entryKind: (p: string) => HostEntryKind | undefined;
  /** Owner of a host path, for `sandbox.docker.user: "auto"`; injected like realpath. */
  pathOwner?: ((p: string) => { uid: number; gid: number } | undefined) | undefined;
  /** The uid:gid cordon runs as, for `sandbox.docker.user: "auto"`; undefined off POSIX. */
  invokingUser?: { uid: number; gid: number } | undefined;
  /** Default: the nine built-in tools. */
  catalog?: ToolCatalog | undefined;
  /** The run's own flags: the last, narrowest tool layer. */
  runTools?: { allow?: string[] | undefined; deny?: string[] | undefined } | undefined;
  /**
   * The run's own egress: `allow` adds hosts to the config's list (`--allow-host`); `only`
   * replaces the whole list for this plan (a setup phase's `--setup-allow-host`).
   */
  runEgress?:
    | {
        allow?: readonly string[] | undefined;
        only?: readonly string[] | undefined;
        /** The agent calls the model through cordon's gateway: keep the egress proxy set up. */
        gateway?: boolean | undefined;
      }
    | undefined;
  /**
   * The image of the run's agent runtime (an agent CLI installed on the sandbox image), used when
   * `sandbox.docker.image` names none.
   */
  runtimeImage?: string | undefined;
  /** The run's `--carry` paths; when given, they replace `sandbox.carry`. */
  carry?: readonly string[] | undefined;
}

export interface RunPlan {
  agent: {
    id: string;
    name?: string;
    /** Where this agent's own settings go: `agents.list[<i>]`, or `agents.defaults` for the implicit agent. */
    configKey: string;
    /** Absolute host path, symlinks resolved. */
    workspace: string;
    /**
     * The project: a hash of `workspace`. Containers, seeded copies and session transcripts are
     * kept per project, so a session named `main` in one project never sees another's.
     */
    workspaceId: string;
    model: { primary: string; fallbacks: string[] };
    /** Thinking level (`agents.*.thinking`); absent = off. */
    thinking?: ThinkingLevel;
    /** The id as written, when normalising changed it (`explain` shows both). */
    writtenId?: string | undefined;
    promptMode: PromptMode;
    /** Where promptMode came from (a subagent session defaults to minimal). */
    promptModeKey: string;
    bootstrap: { files: string[]; maxBytes: number };
    /** The model's context window in tokens (`agents.*.contextWindow`); absent = 200 000. */
    contextWindow?: number;
  };
  sessionKey: string;
  sandbox: {
    enabled: boolean;
    /** One sentence: why sandboxed or not, naming the config key. */
    reason: string;
    mode: SandboxMode;
    scope: SandboxScope;
    workspaceAccess: WorkspaceAccess;
    /** Present iff enabled. */
    spec?: SandboxSpec;
    prune: { stopIdleMs: number; idleMs: number; maxAgeMs: number };
    /** Started containers kept ready for sandboxes of this shape (`sandbox.pool.size`). */
    pool: { size: number };
    /** Lines for `explain`: each setting, where it came from and which key changes it. */
    explanation: string[];
    /** Config key that decided mode, scope and workspace access. */
    keys: { mode: string; scope: string; workspaceAccess: string };
  };
  tools: {
    allowed: string[];
    decisions: ToolDecision[];
    profile: string;
    exec: { timeoutSec: number; maxOutputBytes?: number };
    /** Longest one tool call may run (`tools.callTimeoutSec`), in ms. */
    callTimeoutMs: number;
  };
  /** Whom this session may spawn and which sessions its session tools see (subagent-policy.ts). */
  subagents: SubagentPlan;
  warnings: string[];
}

const hourMs = 3_600_000;

function entries(
  source: { entries: string[]; configKey: string } | undefined,
): ToolEntries | undefined {
  return source && { entries: source.entries, configKey: source.configKey };
}

function toolLayers(
  config: CordonConfig,
  agent: ResolvedAgent,
  sessionKey: string,
  sandboxed: boolean,
  runTools: PlanRunInput["runTools"],
): ToolPolicyLayer[] {
  const global = config.tools;
  const layers: ToolPolicyLayer[] = [
    {
      layer: "global",
      allow: global.allow && { entries: global.allow, configKey: "tools.allow" },
      alsoAllow: global.alsoAllow && { entries: global.alsoAllow, configKey: "tools.alsoAllow" },
      deny: global.deny && { entries: global.deny, configKey: "tools.deny" },
    },
    {
      layer: "agent",
      allow: entries(agent.tools.allow),
      alsoAllow: entries(agent.tools.alsoAllow),
      deny: entries(agent.tools.deny),
    },
  ];
  if (sandboxed) {
    const own = global.sandbox?.tools;
    layers.push(
      {
        layer: "sandbox",
        allow: own?.allow && { entries: own.allow, configKey: "tools.sandbox.tools.allow" },
        alsoAllow: own?.alsoAllow && {
          entries: own.alsoAllow,
          configKey: "tools.sandbox.tools.alsoAllow",
        },
        deny: own?.deny && { entries: own.deny, configKey: "tools.sandbox.tools.deny" },
      },
      {
        layer: "agent-sandbox",
        allow: entries(agent.tools.sandbox.allow),
        alsoAllow: entries(agent.tools.sandbox.alsoAllow),
        deny: entries(agent.tools.sandbox.deny),
      },
    );
  }
  if (isSubagentSessionKey(sessionKey)) {
    // One level only: a subagent does its task, it does not start a tree of runs.
    layers.push({
      layer: "subagent",
      deny: { entries: ["sessions_spawn"], configKey: "(subagent sessions cannot spawn)" },
    });
  }
  if (runTools) {
    layers.push({
      layer: "run",
      allow: runTools.allow && { entries: runTools.allow, configKey: "--allow-tools" },
      deny: runTools.deny && { entries: runTools.deny, configKey: "--deny-tools" },
    });
  }
  return layers;
}

/**
 * The one decision a run is made of (DESIGN.md §3): which agent, which session, sandboxed or not
 * and why, the container (scope key, name, mounts, settings, config hash) and the tools, each
 * decision with the config key that made it. Pure: the same input gives the same plan, and
 * `cordon sandbox explain --json` prints exactly this object.
 *
 * Throws `ConfigError` for an unknown agent or a bad session key, `PolicyDeniedError` when the
 * config asks for something the sandbox rules refuse (every refusal listed) or when no tool is
 * left.
 */
export function planRun(input: PlanRunInput): RunPlan {
  const { config } = input;
  const catalog = input.catalog ?? builtinToolCatalog;
  const agent = resolveAgent(config, input.agentId);
  const sessionKey = normalizeSessionKey(agent.id, input.sessionKey);
  const warnings: string[] = [];
  const problems: ConfigIssue[] = [];
  const explanation: string[] = [];
  const stateDir = normalizeAbsolute(input.stateDir);
  const homeDir = normalizeAbsolute(input.homeDir);

  if (agent.workspace === undefined || !path.posix.isAbsolute(agent.workspace)) {
    throw new ConfigError(
      `the agent "${agent.id}" has no absolute workspace (got ${JSON.stringify(agent.workspace)})`,
      { fix: "set agents.defaults.workspace or the agent's workspace to an absolute path" },
    );
  }
  const configuredWorkspace = normalizeAbsolute(agent.workspace);
  const workspace = normalizeAbsolute(safeRealpath(input.realpath, configuredWorkspace));

  const { mode, scope, workspaceAccess } = agent.sandbox;
  const keys = {
    mode: agent.sandboxKey("mode"),
    scope: agent.sandboxKey("scope"),
    workspaceAccess: agent.sandboxKey("workspaceAccess"),
  };
  const main = mainSessionKey(agent.id);
  let enabled: boolean;
  let reason: string;
  switch (mode) {
    case "off":
      enabled = false;
      reason = `${keys.mode} is "off": tools run on the host, confined to the workspace, with no isolation (trusted use only)`;
      warnings.push(
        `sandbox mode is off (${keys.mode}): commands run on this machine with your permissions; set it to "all" to sandbox them`,
      );
      break;
    case "non-main":
      enabled = sessionKey !== main;
      reason = enabled
        ? `${keys.mode} is "non-main" and ${sessionKey} is not the agent's main session (${main}): sandboxed`
        : `${keys.mode} is "non-main" and ${sessionKey} is the agent's main session: runs on the host, with no isolation`;
      if (!enabled) {
        warnings.push(
          `the main session ${main} runs on the host (${keys.mode} is "non-main"); use another --session or mode "all" to sandbox it`,
        );
      }
      break;
    case "all":
      enabled = true;
      reason = `${keys.mode} is "all": every session is sandboxed`;
      break;
  }
  explanation.push(reason);

  const prune = {
    stopIdleMs: agent.sandbox.prune.stopIdleMinutes * 60_000,
    idleMs: agent.sandbox.prune.idleHours * hourMs,
    maxAgeMs: agent.sandbox.prune.maxAgeDays * 24 * hourMs,
  };

  let spec: SandboxSpec | undefined;
  if (enabled) {
    spec = planSandbox({
      input,
      agent,
      sessionKey,
      workspace,
      stateDir,
      homeDir,
      problems,
      warnings,
      explanation,
      keys,
    });
  } else {
    explanation.push(
      `not sandboxed: ${keys.scope}, ${keys.workspaceAccess} and sandbox.docker do not apply; tools.sandbox.tools is not applied`,
    );
  }
  if (problems.length > 0) throw new SandboxSettingsRefusedError(agent.id, problems);

  const toolResult = evaluateToolPolicy({
    catalog,
    profile: agent.tools.profile,
    additions: [
      ...(config.tools.alsoAllow
        ? [{ entries: config.tools.alsoAllow, configKey: "tools.alsoAllow" }]
        : []),
      ...(agent.tools.alsoAllow ? [entries(agent.tools.alsoAllow) as ToolEntries] : []),
    ],
    layers: toolLayers(config, agent, sessionKey, enabled, input.runTools),
  });
  warnings.push(...toolResult.warnings);
  if (toolResult.allowed.length === 0) {
    const keysInvolved = [
      ...new Set(toolResult.decisions.flatMap((d) => (d.blockedBy ?? []).map((b) => b.configKey))),
    ];
    throw new PolicyDeniedError(
      `no tool is allowed for agent "${agent.id}" in session ${sessionKey}; decided by ${keysInvolved.join(", ")}${toolResult.warnings.map((w) => `\n  ${w}`).join("")}`,
      {
        fix: `loosen ${keysInvolved.join(" or ")}; \`cordon sandbox explain --agent ${agent.id}\` shows each decision`,
      },
    );
  }

  const exec: RunPlan["tools"]["exec"] = { timeoutSec: agent.tools.exec.timeoutSec };
  if (agent.tools.exec.maxOutputBytes !== undefined) {
    exec.maxOutputBytes = agent.tools.exec.maxOutputBytes;
  }
  const plan: RunPlan = {
    agent: {
      id: agent.id,
      configKey: agent.index === undefined ? "agents.defaults" : `agents.list[${agent.index}]`,
      workspace,
      workspaceId: workspaceIdOf(workspace),
      model: agent.model,
      ...(agent.writtenId !== undefined ? { writtenId: agent.writtenId } : {}),
      promptMode: agent.ownPromptMode ?? (isSubagentSessionKey(sessionKey) ? "minimal" : "full"),
      promptModeKey:
        agent.ownPromptMode === undefined && isSubagentSessionKey(sessionKey)
          ? "subagent sessions default to minimal"
          : agent.promptModeKey,
      bootstrap: agent.bootstrap,
    },
    sessionKey,
    sandbox: {
      enabled,
      reason,
      mode,
      scope,
      workspaceAccess,
      prune,
      pool: { size: agent.sandbox.pool.size },
      explanation,
      keys,
    },
    tools: {
      allowed: toolResult.allowed,
      decisions: toolResult.decisions,
      profile: agent.tools.profile.name,
      exec,
      callTimeoutMs: agent.tools.callTimeoutSec * 1000,
    },
    subagents: planSubagents({ config, agent, sessionKey, sandboxed: enabled }),
    warnings,
  };
  if (agent.name !== undefined) plan.agent.name = agent.name;
  if (agent.thinking !== undefined) plan.agent.thinking = agent.thinking;
  if (agent.contextWindow !== undefined) plan.agent.contextWindow = agent.contextWindow;
  if (spec) plan.sandbox.spec = spec;
  return plan;
}

interface SandboxPlanContext {
  input: PlanRunInput;
  agent: ResolvedAgent;
  sessionKey: string;
  workspace: string;
  stateDir: string;
  homeDir: string;
  problems: ConfigIssue[];
  warnings: string[];
  explanation: string[];
  keys: RunPlan["sandbox"]["keys"];
}

function planSandbox(context: SandboxPlanContext): SandboxSpec {
  const {
    input,
    agent,
    sessionKey,
    workspace,
    stateDir,
    homeDir,
    problems,
    warnings,
    explanation,
    keys,
  } = context;
  const { scope, workspaceAccess } = agent.sandbox;
  const docker = agent.sandbox.docker;
  const guarded = protectedPaths(homeDir, stateDir);

  const workspaceId = workspaceIdOf(workspace);
  const scopeKey = scopeKeyOf(scope, agent.id, sessionKey, workspaceId);
  const containerName = containerNameOf({
    prefix: docker.containerPrefix,
    scopeKey,
    stateDir,
    workspace,
  });
  explanation.push(
    {
      session: `scope "session" (${keys.scope}): this session has its own container for this workspace`,
      agent: `scope "agent" (${keys.scope}): every session of agent "${agent.id}" on this workspace shares one container`,
      shared: `scope "shared" (${keys.scope}): all agents and sessions on this workspace share one container`,
    }[scope],
    `scope key ${scopeKey} (workspace ${workspace} is ${workspaceId}) → container ${containerName}`,
  );
  if (agent.ignoredDockerKeys.length > 0) {
    warnings.push(
      `scope "shared" ignores per-agent docker settings: ${agent.ignoredDockerKeys.join(", ")} (set them in agents.defaults.sandbox.docker, or give the agent scope "agent")`,
    );
  }

  // The workspace is exposed when mounted (ro/rw) or copied into the sandbox (none + seed).
  const seed = workspaceAccess === "none" && agent.sandbox.seed;
  if (workspaceAccess !== "none" || seed) {
    const problem = protectedPathProblem({
      path: workspace,
      realpath: input.realpath,
      protectedPaths: guarded.filter((p) => p.kind !== "state"),
    });
    if (problem) {
      problems.push({
        path:
          agent.index === undefined
            ? "agents.defaults.workspace"
            : `agents.list[${agent.index}].workspace`,
        message: `the agent workspace ${problem}; ${workspaceAccess === "none" ? "seeding would copy it" : "mounting would expose it"} into the sandbox — run cordon from a project directory or set the workspace`,
      });
    }
    if (isWithin(stateDir, workspace)) {
      warnings.push(
        `the state directory ${stateDir} is inside the agent workspace; its sessions are visible in the sandbox (set CORDON_HOME elsewhere)`,
      );
    }
  }

  let privateWorkspace: string | undefined;
  if (workspaceAccess !== "rw") {
    const configuredRoot = agent.sandbox.workspaceRoot;
    let root = path.posix.join(stateDir, "workspaces");
    if (configuredRoot !== undefined) {
      if (!path.posix.isAbsolute(configuredRoot)) {
        problems.push({
          path: agent.sandboxKey("workspaceRoot"),
          message: "must be an absolute path",
        });
      } else {
        root = normalizeAbsolute(configuredRoot);
        const problem = protectedPathProblem({
          path: root,
          realpath: input.realpath,
          protectedPaths: guarded.filter((p) => p.kind === "system" || p.kind === "credentials"),
        });
        if (problem) problems.push({ path: agent.sandboxKey("workspaceRoot"), message: problem });
      }
    }
    privateWorkspace = path.posix.join(root, containerName);
  }
  const diskBytes =
    privateWorkspace === undefined
      ? undefined
      : resolveDiskBudget(agent.sandbox.disk, agent.sandboxKey("disk"), problems);

  const settings = resolveDockerSettings({
    docker,
    key: agent.dockerKey,
    workspaceAccess,
    workspaceOwner: input.pathOwner?.(workspace),
    invokingUser: input.invokingUser,
    problems,
    warnings,
  });
  settings.projectImage = planProjectImage({
    docker,
    key: agent.dockerKey,
    workspace,
    problems,
    explanation,
  });
  const network = planEgress({
    config: agent.sandbox.egress,
    key: (field) => `${agent.sandboxKey("egress")}.${field}`,
    runAllow: input.runEgress?.allow,
    phaseAllow: input.runEgress?.only,
    gateway: input.runEgress?.gateway,
    network: settings.network,
    networkKey: agent.dockerKey("network"),
    containerName,
    entryKind: input.entryKind,
    problems,
    explanation,
  });
  if (network.egress && settings.executor !== "resident") {
    problems.push({
      path: agent.dockerKey("executor"),
      message: `is "${settings.executor ?? "exec"}", but the egress proxy and the model gateway are reached through ports forwarded by cordon's resident executor: use "resident"`,
    });
  }
  if (settings.image === undefined && input.runtimeImage) settings.image = input.runtimeImage;
  Object.assign(settings.env, network.env);
  // After egress: only a sandbox with no way out at all (no network, no proxy) is told it is offline.
  settings.env = withOfflineDefaults(
    settings.network.toLowerCase() === "none" && !network.egress,
    settings.env,
  );
  const mounts = planMounts({
    workspaceAccess,
    protectGitDir: agent.sandbox.protectGitDir,
    protectGitDirKey: agent.sandboxKey("protectGitDir"),
    entryKind: input.entryKind,
    agentWorkspace: workspace,
    privateWorkspace,
    workdir: settings.workdir,
    tmpfsTargets: Object.keys(settings.tmpfs),
    binds: docker.binds,
    bindRoots: docker.bindRoots ?? [workspace, homeDir],
    allowExternalBindSources: docker.dangerouslyAllowExternalBindSources,
    homeDir,
    realpath: input.realpath,
    protectedPaths: guarded,
    bindsKey: agent.dockerKey("binds"),
    bindRootsKey: agent.dockerKey("bindRoots"),
    problems,
    warnings,
  });
  if (network.caMount) mounts.push(network.caMount);

  explanation.push(
    {
      none: `workspace access "none" (${keys.workspaceAccess}): the agent workspace is not mounted; ${settings.workdir} is a private directory${seed ? " seeded with a copy of it (review with `cordon diff`)" : " (empty; seed is off)"}`,
      ro: `workspace access "ro" (${keys.workspaceAccess}): the agent workspace is read-only at /agent; ${settings.workdir} is private scratch space`,
      rw: `workspace access "rw" (${keys.workspaceAccess}): the agent workspace is mounted read-write at ${settings.workdir}; changes are live on the host`,
    }[workspaceAccess],
  );
  const carry = planCarry({
    configured: agent.sandbox.carry,
    configKey: agent.sandboxKey("carry"),
    flag: input.carry,
    workspace,
    seeded: seed,
    workspaceAccessKey: keys.workspaceAccess,
    entryKind: input.entryKind,
    warnings,
    explanation,
  });

  const hashed = {
    scope,
    scopeKey,
    containerName,
    workspaceAccess,
    privateWorkspace,
    // Not carry: it fills a copy once, when it is seeded, and shapes no container; `cordon diff`
    // of a session started with --carry must not find its container stale.
    seed,
    mounts,
    docker: settings,
    egress: network.egress,
  };
  return {
    scope,
    scopeKey,
    containerName,
    agentId: agent.id,
    sessionKey,
    workspaceAccess,
    agentWorkspace: workspace,
    privateWorkspace,
    diskBytes,
    seed,
    carry,
    seedInclude: agent.sandbox.seedInclude.flatMap((entry) => {
      const normalized = normalizeCarryPath(entry);
      return "path" in normalized ? [normalized.path] : [];
    }),
    mounts,
    docker: settings,
    egress: network.egress,
    // Session and agent are labels, not shape: a new session reusing an agent-scoped container
    // must not find it stale.
    configHash: hashOf(hashed),
  };
}
