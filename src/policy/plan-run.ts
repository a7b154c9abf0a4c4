import path from "node:path";

import { ConfigError, PolicyDeniedError } from "../common/index.js";
import type { AgentRuntimeName, ConfigIssue, CordonConfig, PromptMode } from "../config/index.js";
import { normalizeCarryPath } from "../config/index.js";
import type {
  DockerSettings,
  SandboxMode,
  SandboxScope,
  SandboxSpec,
  WorkspaceAccess,
} from "../sandbox/index.js";
import { hashOf } from "../common/index.js";
import { containerNameOf, scopeKeyOf, workspaceIdOf } from "./container-name.js";
import { planCarry } from "./carry.js";
import { resolveDiskBudget } from "./disk-budget.js";
import { planAgentRuntime, type PlannedRuntime } from "./agent-runtime.js";
import { planLimits, type PlannedLimits, type RunLimitsRequest } from "./run-limits.js";
import { resolveDockerSettings } from "./docker-settings.js";
import { combine, planned, type Planned } from "./planned.js";
import { planSandboxImage } from "./sandbox-image.js";
import { planEgress } from "./egress.js";
import { withOfflineDefaults } from "./offline-defaults.js";
import { planMounts, type HostEntryKind } from "./mount-plan.js";
import {
  isWithin,
  normalizeAbsolute,
  protectedPathProblem,
  protectedPaths,
  safeRealpath,
  type ProtectedPath,
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
      }
    | undefined;
  /** The run's own limits (`--max-turns`, `--timeout`, `--thinking`): the last layer. */
  runLimits?: RunLimitsRequest | undefined;
  /** The run's agent program (`--runtime`), over the agent's `runtime`. */
  runtime?: AgentRuntimeName | undefined;
  /** The run's `--carry` paths; when given, they replace `sandbox.carry`. */
  carry?: readonly string[] | undefined;
  /** Copy the carried trees once for every sandbox planned with this key (`SandboxSpec.carryShare`). */
  carryShare?: string | undefined;
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
    /** The id as written, when normalising changed it (`explain` shows both). */
    writtenId?: string | undefined;
    promptMode: PromptMode;
    /** Where promptMode came from (a subagent session defaults to minimal). */
    promptModeKey: string;
    bootstrap: { files: string[]; maxBytes: number };
    /** The agent program that runs the task (agent-runtime.ts). */
    runtime: PlannedRuntime;
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
    /**
     * Whether a run records the seeded copy's state before each turn's tools (`sandbox.checkpoints`);
     * "off" whenever there is no seeded private copy.
     */
    checkpoints: "turn" | "off";
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
  };
  /** Turns, tokens, time, the tool call limit, context window and thinking (run-limits.ts). */
  limits: PlannedLimits;
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
  const sandboxing = decideSandboxing({ mode, modeKey: keys.mode, agentId: agent.id, sessionKey });
  const { enabled, reason } = sandboxing.value;

  const prune = {
    stopIdleMs: agent.sandbox.prune.stopIdleMinutes * 60_000,
    idleMs: agent.sandbox.prune.idleHours * hourMs,
    maxAgeMs: agent.sandbox.prune.maxAgeDays * 24 * hourMs,
  };

  const ownRuntime =
    agent.index === undefined ? undefined : config.agents.list[agent.index]?.runtime;
  const runtime = planAgentRuntime({
    flag: input.runtime,
    own: ownRuntime && { value: ownRuntime, configKey: `agents.list[${agent.index}].runtime` },
    defaults: config.agents.defaults.runtime,
    sandboxed: enabled,
  });

  const sandboxed = enabled
    ? planSandbox({ run: input, agent, sessionKey, workspace, stateDir, homeDir, runtime })
    : planned(undefined, {
        notes: [
          `not sandboxed: ${keys.scope}, ${keys.workspaceAccess} and sandbox.docker do not apply; tools.sandbox.tools is not applied`,
        ],
      });
  const findings = combine([sandboxing, sandboxed]);
  if (findings.issues.length > 0) throw new SandboxSettingsRefusedError(agent.id, findings.issues);
  const spec = sandboxed.value;
  const warnings = findings.warnings;
  const explanation = findings.notes;

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
      runtime,
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
      checkpoints:
        enabled && workspaceAccess === "none" && agent.sandbox.seed
          ? agent.sandbox.checkpoints
          : "off",
      explanation,
      keys,
    },
    tools: {
      allowed: toolResult.allowed,
      decisions: toolResult.decisions,
      profile: agent.tools.profile.name,
      exec,
    },
    limits: planLimits({
      runtime: runtime.name,
      callTimeoutSec: agent.tools.callTimeoutSec,
      contextWindow: agent.contextWindow,
      thinking: agent.thinking,
      run: input.runLimits,
    }),
    subagents: planSubagents({ config, agent, sessionKey, sandboxed: enabled }),
    warnings,
  };
  if (agent.name !== undefined) plan.agent.name = agent.name;
  if (spec) plan.sandbox.spec = spec;
  return plan;
}

/**
 * Sandboxed or not, by the mode and the session: one sentence why (the first line `explain`
 * shows), and a warning whenever tools run on the host.
 */
function decideSandboxing(input: {
  mode: SandboxMode;
  modeKey: string;
  agentId: string;
  sessionKey: string;
}): Planned<{ enabled: boolean; reason: string }> {
  const { mode, modeKey, sessionKey } = input;
  const main = mainSessionKey(input.agentId);
  const decided = (enabled: boolean, reason: string, warnings: string[] = []) =>
    planned({ enabled, reason }, { notes: [reason], warnings });
  switch (mode) {
    case "off":
      return decided(
        false,
        `${modeKey} is "off": tools run on the host, confined to the workspace, with no isolation (trusted use only)`,
        [
          `sandbox mode is off (${modeKey}): commands run on this machine with your permissions; set it to "all" to sandbox them`,
        ],
      );
    case "non-main":
      return sessionKey !== main
        ? decided(
            true,
            `${modeKey} is "non-main" and ${sessionKey} is not the agent's main session (${main}): sandboxed`,
          )
        : decided(
            false,
            `${modeKey} is "non-main" and ${sessionKey} is the agent's main session: runs on the host, with no isolation`,
            [
              `the main session ${main} runs on the host (${modeKey} is "non-main"); use another --session or mode "all" to sandbox it`,
            ],
          );
    case "all":
      return decided(true, `${modeKey} is "all": every session is sandboxed`);
  }
}

interface SandboxPlanInput {
  run: PlanRunInput;
  agent: ResolvedAgent;
  sessionKey: string;
  /** The agent workspace, symlinks resolved; cordon's state and home directories, normalised. */
  workspace: string;
  stateDir: string;
  homeDir: string;
  runtime: PlannedRuntime;
}

/**
 * The container of a sandboxed run: each part decided by its own planner (docker settings,
 * project image, egress, mounts, carry, disk budget), their findings combined in one order.
 */
function planSandbox(input: SandboxPlanInput): Planned<SandboxSpec> {
  const { run, agent, sessionKey, workspace, stateDir, homeDir, runtime } = input;
  const gateway = runtime.name === "claude-code" && runtime.gateway;
  const { scope, workspaceAccess } = agent.sandbox;
  const docker = agent.sandbox.docker;
  const scopeKeyName = agent.sandboxKey("scope");
  const accessKey = agent.sandboxKey("workspaceAccess");
  const guarded = protectedPaths(homeDir, stateDir);

  const workspaceId = workspaceIdOf(workspace);
  const scopeKey = scopeKeyOf(scope, agent.id, sessionKey, workspaceId);
  const containerName = containerNameOf({
    prefix: docker.containerPrefix,
    scopeKey,
    stateDir,
    workspace,
  });
  const placement = planned(undefined, {
    notes: [
      {
        session: `scope "session" (${scopeKeyName}): this session has its own container for this workspace`,
        agent: `scope "agent" (${scopeKeyName}): every session of agent "${agent.id}" on this workspace shares one container`,
        shared: `scope "shared" (${scopeKeyName}): all agents and sessions on this workspace share one container`,
      }[scope],
      `scope key ${scopeKey} (workspace ${workspace} is ${workspaceId}) → container ${containerName}`,
    ],
    warnings:
      agent.ignoredDockerKeys.length > 0
        ? [
            `scope "shared" ignores per-agent docker settings: ${agent.ignoredDockerKeys.join(", ")} (set them in agents.defaults.sandbox.docker, or give the agent scope "agent")`,
          ]
        : [],
  });

  // The workspace is exposed when mounted (ro/rw) or copied into the sandbox (none + seed).
  const seed = workspaceAccess === "none" && agent.sandbox.seed;
  const exposure = checkWorkspaceExposure({ agent, workspace, stateDir, seed, guarded, run });
  const privateWorkspace = planPrivateWorkspace({ agent, stateDir, containerName, guarded, run });
  const disk =
    privateWorkspace.value === undefined
      ? planned(undefined)
      : resolveDiskBudget(agent.sandbox.disk, agent.sandboxKey("disk"));

  const settings = resolveDockerSettings({
    docker,
    key: agent.dockerKey,
    workspaceAccess,
    workspaceOwner: run.pathOwner?.(workspace),
    invokingUser: run.invokingUser,
  });
  const image = planSandboxImage({
    docker,
    key: agent.dockerKey,
    workspace,
    runtime: runtime.name === "claude-code" ? "claude-code" : undefined,
  });
  const network = planEgress({
    config: agent.sandbox.egress,
    key: (field) => `${agent.sandboxKey("egress")}.${field}`,
    runAllow: run.runEgress?.allow,
    phaseAllow: run.runEgress?.only,
    gateway,
    network: settings.value.network,
    networkKey: agent.dockerKey("network"),
    containerName,
    entryKind: run.entryKind,
  });
  const { egress, caMount } = network.value;
  const executor = planned(undefined, {
    issues:
      egress && settings.value.executor !== "resident"
        ? [
            {
              path: agent.dockerKey("executor"),
              message: `is "${settings.value.executor ?? "exec"}", but the egress proxy and the model gateway are reached through ports forwarded by cordon's resident executor: use "resident"`,
            },
          ]
        : [],
  });
  const dockerSettings: DockerSettings = {
    image: image.value,
    ...settings.value,
    // After egress: only a sandbox with no way out at all (no network, no proxy) is told it is offline.
    env: withOfflineDefaults(settings.value.network.toLowerCase() === "none" && !egress, {
      ...settings.value.env,
      ...network.value.env,
    }),
  };
  const planMountsResult = planMounts({
    workspaceAccess,
    agentWorkspace: workspace,
    privateWorkspace: privateWorkspace.value,
    workdir: dockerSettings.workdir,
    tmpfsTargets: Object.keys(dockerSettings.tmpfs),
    gitDir: { protect: agent.sandbox.protectGitDir, key: agent.sandboxKey("protectGitDir") },
    binds: {
      entries: docker.binds,
      roots: docker.bindRoots ?? [workspace, homeDir],
      allowExternalSources: docker.dangerouslyAllowExternalBindSources,
      key: agent.dockerKey("binds"),
      rootsKey: agent.dockerKey("bindRoots"),
    },
    host: {
      homeDir,
      realpath: run.realpath,
      entryKind: run.entryKind,
      protectedPaths: guarded,
    },
  });
  const mounts = [...planMountsResult.value, ...(caMount ? [caMount] : [])];

  const workdir = dockerSettings.workdir;
  const access = planned(undefined, {
    notes: [
      {
        none: `workspace access "none" (${accessKey}): the agent workspace is not mounted; ${workdir} is a private directory${seed ? " seeded with a copy of it (review with `cordon diff`)" : " (empty; seed is off)"}`,
        ro: `workspace access "ro" (${accessKey}): the agent workspace is read-only at /agent; ${workdir} is private scratch space`,
        rw: `workspace access "rw" (${accessKey}): the agent workspace is mounted read-write at ${workdir}; changes are live on the host`,
      }[workspaceAccess],
    ],
  });
  const carry = planCarry({
    configured: agent.sandbox.carry,
    configKey: agent.sandboxKey("carry"),
    flag: run.carry,
    workspace,
    seeded: seed,
    workspaceAccessKey: accessKey,
    entryKind: run.entryKind,
  });

  const hashed = {
    scope,
    scopeKey,
    containerName,
    workspaceAccess,
    privateWorkspace: privateWorkspace.value,
    // Only when set: the default ("auto") keeps the hashes of containers made before the key.
    ...(agent.sandbox.workspaceStorage === "auto"
      ? {}
      : { workspaceStorage: agent.sandbox.workspaceStorage }),
    // Not carry: it fills a copy once, when it is seeded, and shapes no container; `cordon diff`
    // of a session started with --carry must not find its container stale.
    seed,
    mounts,
    docker: hashedDocker(dockerSettings),
    egress,
  };
  const spec: SandboxSpec = {
    scope,
    scopeKey,
    containerName,
    agentId: agent.id,
    sessionKey,
    workspaceAccess,
    agentWorkspace: workspace,
    privateWorkspace: privateWorkspace.value,
    workspaceStorage: agent.sandbox.workspaceStorage,
    diskBytes: disk.value,
    seed,
    carry: carry.value,
    // Not hashed either: it only says where a new copy's carried trees come from.
    ...(carry.value?.length && run.carryShare !== undefined ? { carryShare: run.carryShare } : {}),
    seedInclude: agent.sandbox.seedInclude.flatMap((entry) => {
      const normalized = normalizeCarryPath(entry);
      return "path" in normalized ? [normalized.path] : [];
    }),
    mounts,
    docker: dockerSettings,
    egress,
    // Session and agent are labels, not shape: a new session reusing an agent-scoped container
    // must not find it stale.
    configHash: hashOf(hashed),
  };
  return {
    value: spec,
    ...combine([
      placement,
      exposure,
      privateWorkspace,
      disk,
      settings,
      image,
      network,
      executor,
      planMountsResult,
      access,
      carry,
    ]),
  };
}

/**
 * The docker settings as the config hash has always read them — the image as a reference (none
 * for a built-in or runtime image, whose tag the container's image label holds) and the project
 * image beside it — so that naming the image's source in the spec finds no container stale.
 */
function hashedDocker(docker: DockerSettings): object {
  const { image, ...rest } = docker;
  return {
    ...rest,
    image: image.source === "config" ? image.reference : undefined,
    projectImage: image.source === "project" ? image.project : undefined,
  };
}

/**
 * A workspace mounted (ro/rw) or copied (none + seed) into the sandbox must hold no credentials;
 * a state directory inside it shows its sessions to the sandbox.
 */
function checkWorkspaceExposure(input: {
  run: PlanRunInput;
  agent: ResolvedAgent;
  workspace: string;
  stateDir: string;
  seed: boolean;
  guarded: readonly ProtectedPath[];
}): Planned<undefined> {
  const { agent, workspace, stateDir } = input;
  const access = agent.sandbox.workspaceAccess;
  if (access === "none" && !input.seed) return planned(undefined);
  const issues: ConfigIssue[] = [];
  const problem = protectedPathProblem({
    path: workspace,
    realpath: input.run.realpath,
    protectedPaths: input.guarded.filter((p) => p.kind !== "state"),
  });
  if (problem) {
    issues.push({
      path:
        agent.index === undefined
          ? "agents.defaults.workspace"
          : `agents.list[${agent.index}].workspace`,
      message: `the agent workspace ${problem}; ${access === "none" ? "seeding would copy it" : "mounting would expose it"} into the sandbox — run cordon from a project directory or set the workspace`,
    });
  }
  const warnings = isWithin(stateDir, workspace)
    ? [
        `the state directory ${stateDir} is inside the agent workspace; its sessions are visible in the sandbox (set CORDON_HOME elsewhere)`,
      ]
    : [];
  return planned(undefined, { issues, warnings });
}

/**
 * Where the private workspace (access none and ro) lives on the host: under
 * `sandbox.workspaceRoot`, else the state directory, named after the container.
 */
function planPrivateWorkspace(input: {
  run: PlanRunInput;
  agent: ResolvedAgent;
  stateDir: string;
  containerName: string;
  guarded: readonly ProtectedPath[];
}): Planned<string | undefined> {
  const { agent } = input;
  if (agent.sandbox.workspaceAccess === "rw") return planned(undefined);
  const configuredRoot = agent.sandbox.workspaceRoot;
  const key = agent.sandboxKey("workspaceRoot");
  let root = path.posix.join(input.stateDir, "workspaces");
  const issues: ConfigIssue[] = [];
  if (configuredRoot !== undefined) {
    if (!path.posix.isAbsolute(configuredRoot)) {
      issues.push({ path: key, message: "must be an absolute path" });
    } else {
      root = normalizeAbsolute(configuredRoot);
      const problem = protectedPathProblem({
        path: root,
        realpath: input.run.realpath,
        protectedPaths: input.guarded.filter(
          (p) => p.kind === "system" || p.kind === "credentials",
        ),
      });
      if (problem) issues.push({ path: key, message: problem });
    }
  }
  return planned(path.posix.join(root, input.containerName), { issues });
}
