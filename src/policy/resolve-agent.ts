import { ConfigError } from "../common/index.js";
import {
  configDefaults,
  mergeLayers,
  normalizeAgentId,
  type PromptMode,
  type AgentConfig,
  type CordonConfig,
  type DockerConfig,
  type ModelRef,
  type SandboxConfig,
  type ThinkingLevel,
  type ToolLayerConfig,
} from "../config/index.js";

/** The id of the agent a config without `agents.list` has. */
export const implicitAgentId = "main";

/** Where each tool list of an agent came from. */
export interface ToolListSource {
  entries: string[];
  configKey: string;
}

/** An agent with `agents.defaults` and its own entry merged, and where each value came from. */
export interface ResolvedAgent {
  /** Normalised (agent-id.ts): what session keys, containers and files use. */
  id: string;
  /** The id as the config or `--agent` wrote it, when normalising changed it. */
  writtenId?: string | undefined;
  name?: string | undefined;
  /** Index in `agents.list`, undefined for the implicit agent. */
  index?: number | undefined;
  isDefault: boolean;
  workspace: string | undefined;
  model: { primary: string; fallbacks: string[] };
  /** Workspace files read into the system prompt, and the most bytes of each. */
  bootstrap: { files: string[]; maxBytes: number };
  sandbox: SandboxConfig;
  /** Config key that decided each sandbox setting (`agents.list[1].sandbox.scope`). */
  sandboxKey: (field: keyof SandboxConfig) => string;
  /** Config key for a docker setting, given the effective scope. */
  dockerKey: (field: keyof DockerConfig) => string;
  /** Docker keys the agent sets that scope `shared` ignores (with different values). */
  ignoredDockerKeys: string[];
  tools: {
    profile: { name: string; configKey: string };
    allow?: ToolListSource | undefined;
    alsoAllow?: ToolListSource | undefined;
    deny?: ToolListSource | undefined;
    sandbox: {
      allow?: ToolListSource | undefined;
      alsoAllow?: ToolListSource | undefined;
      deny?: ToolListSource | undefined;
    };
    exec: { timeoutSec: number; maxOutputBytes?: number | undefined; configKey: string };
    /** Longest one tool call may run, in seconds (`tools.callTimeoutSec`, the agent's own wins). */
    callTimeoutSec: { value: number; configKey: string };
  };
  /** `thinking` of the agent, else of `agents.defaults`; undefined = not set. */
  thinking?: { value: ThinkingLevel; configKey: string } | undefined;
  /** `contextWindow` (tokens) of the agent, else of `agents.defaults`; undefined = not set. */
  contextWindow?: { value: number; configKey: string } | undefined;
  /** Whom a session of this agent may spawn, and with which model (subagent-policy.ts). */
  subagents: {
    /** Agent ids as written (normalised when compared); undefined = only this agent's own id. */
    allowAgents?: string[] | undefined;
    /** The config key that set them (or would: `agents.defaults.subagents.allowAgents`). */
    allowAgentsKey: string;
    model?: string | undefined;
  };
  /** `promptMode` of the agent, else of `agents.defaults`; undefined = the session's default. */
  ownPromptMode?: PromptMode | undefined;
  /** Where `promptMode` came from, for explain. */
  promptModeKey: string;
}

/** Picks the agent: the named one, else the `default: true` one, else the first, else `main`. */
function pickAgent(
  config: CordonConfig,
  agentId: string | undefined,
): { entry?: AgentConfig; index?: number; id: string } {
  const list = config.agents.list;
  const ids = list.map((agent) => normalizeAgentId(agent.id));
  if (agentId !== undefined) {
    const wanted = normalizeAgentId(agentId);
    const index = ids.indexOf(wanted);
    const entry = list[index];
    if (entry) return { entry, index, id: wanted };
    if (list.length === 0 && wanted === implicitAgentId) return { id: wanted };
    const known = list.length ? ids.join(", ") : `only "${implicitAgentId}"`;
    throw new ConfigError(`no agent "${agentId}" in the config (agents: ${known})`, {
      fix: list.length
        ? `pass one of --agent ${ids.join(" | ")}, or add it to agents.list`
        : `add { id: "${agentId}" } to agents.list, or leave out --agent`,
    });
  }
  const index = Math.max(
    0,
    list.findIndex((agent) => agent.default === true),
  );
  const entry = list[index];
  return entry ? { entry, index, id: normalizeAgentId(entry.id) } : { id: implicitAgentId };
}

function modelOf(
  layers: readonly (ModelRef | CordonConfig["model"] | undefined)[],
): ResolvedAgent["model"] {
  let primary = "";
  let fallbacks: string[] = [];
  for (const layer of layers) {
    if (layer === undefined) continue;
    if (typeof layer === "string") {
      primary = layer;
      continue;
    }
    if (layer.primary !== undefined) primary = layer.primary;
    if (layer.fallbacks !== undefined) fallbacks = [...layer.fallbacks];
  }
  return { primary, fallbacks };
}

/** Resolves the effective settings of one agent (DESIGN.md §4: agent values beat defaults). */
export function resolveAgent(config: CordonConfig, agentId: string | undefined): ResolvedAgent {
  const picked = pickAgent(config, agentId);
  const { entry, index } = picked;
  const agentPath = index === undefined ? undefined : `agents.list[${index}]`;
  const defaults = config.agents.defaults;
  const own = entry?.sandbox;

  const scope = own?.scope ?? defaults.sandbox.scope;
  const sharedScope = scope === "shared";
  const ownDocker = own?.docker ?? {};
  // Shared: one container for all agents, so only agents.defaults may shape it.
  const ignoredDockerKeys = sharedScope
    ? Object.entries(ownDocker)
        .filter(
          ([key, value]) =>
            value !== undefined &&
            JSON.stringify(value) !==
              JSON.stringify(defaults.sandbox.docker[key as keyof DockerConfig]),
        )
        .map(([key]) => `${agentPath ?? "agents.list[?]"}.sandbox.docker.${key}`)
    : [];
  const docker = (
    sharedScope ? defaults.sandbox.docker : mergeLayers(defaults.sandbox.docker, ownDocker)
  ) as DockerConfig;
  const sandbox: SandboxConfig = {
    ...defaults.sandbox,
    ...Object.fromEntries(
      Object.entries(own ?? {}).filter(
        ([key, value]) =>
          value !== undefined &&
          key !== "docker" &&
          key !== "prune" &&
          key !== "pool" &&
          key !== "egress",
      ),
    ),
    prune: mergeLayers(defaults.sandbox.prune, own?.prune) as SandboxConfig["prune"],
    pool: mergeLayers(defaults.sandbox.pool, own?.pool) as SandboxConfig["pool"],
    // Like docker: one shared container has one network policy, the defaults'.
    egress: (sharedScope
      ? defaults.sandbox.egress
      : mergeLayers(defaults.sandbox.egress, own?.egress)) as SandboxConfig["egress"],
    docker,
  };

  const sandboxKey = (field: keyof SandboxConfig) =>
    agentPath && own?.[field] !== undefined
      ? `${agentPath}.sandbox.${field}`
      : `agents.defaults.sandbox.${field}`;
  const dockerKey = (field: keyof DockerConfig) =>
    agentPath && !sharedScope && ownDocker[field] !== undefined
      ? `${agentPath}.sandbox.docker.${field}`
      : `agents.defaults.sandbox.docker.${field}`;

  // Agent tools: agents.defaults.tools overlaid by the agent's own tools (lists replace).
  const toolSources = [
    { tools: defaults.tools, path: "agents.defaults.tools" },
    { tools: entry?.tools, path: `${agentPath}.tools` },
  ];
  const agentList = (
    pick: (tools: NonNullable<AgentConfig["tools"]>) => string[] | undefined,
    suffix: string,
  ): ToolListSource | undefined => {
    let found: ToolListSource | undefined;
    for (const source of toolSources) {
      const entries = source.tools ? pick(source.tools) : undefined;
      if (entries !== undefined) found = { entries, configKey: `${source.path}.${suffix}` };
    }
    return found;
  };
  const sandboxList = (field: keyof ToolLayerConfig) =>
    agentList((tools) => tools.sandbox?.tools?.[field], `sandbox.tools.${field}`);

  let profile = { name: config.tools.profile as string, configKey: "tools.profile" };
  for (const source of toolSources) {
    if (source.tools?.profile !== undefined) {
      profile = { name: source.tools.profile, configKey: `${source.path}.profile` };
    }
  }
  let exec = {
    timeoutSec: config.tools.exec?.timeoutSec ?? configDefaults.tools.execTimeoutSec,
    maxOutputBytes: config.tools.exec?.maxOutputBytes,
    configKey: "tools.exec",
  };
  for (const source of toolSources) {
    const own = source.tools?.exec;
    if (own) {
      exec = {
        timeoutSec: own.timeoutSec ?? exec.timeoutSec,
        maxOutputBytes: own.maxOutputBytes ?? exec.maxOutputBytes,
        configKey: `${source.path}.exec`,
      };
    }
  }

  let callTimeoutSec = { value: config.tools.callTimeoutSec, configKey: "tools.callTimeoutSec" };
  for (const source of toolSources) {
    const own = source.tools?.callTimeoutSec;
    if (own !== undefined)
      callTimeoutSec = { value: own, configKey: `${source.path}.callTimeoutSec` };
  }
  /** The agent's own setting, else the defaults', with the key that set it. */
  const ownOrDefault = <T>(
    own: T | undefined,
    fallback: T | undefined,
    field: string,
  ): { value: T; configKey: string } | undefined =>
    own !== undefined
      ? { value: own, configKey: `${agentPath}.${field}` }
      : fallback !== undefined
        ? { value: fallback, configKey: `agents.defaults.${field}` }
        : undefined;

  const writtenId = entry?.id ?? agentId;
  return {
    id: picked.id,
    writtenId: writtenId !== undefined && writtenId !== picked.id ? writtenId : undefined,
    thinking: ownOrDefault(entry?.thinking, defaults.thinking, "thinking"),
    contextWindow: ownOrDefault(entry?.contextWindow, defaults.contextWindow, "contextWindow"),
    name: entry?.name,
    index,
    isDefault: entry === undefined || index === pickAgent(config, undefined).index,
    workspace: entry?.workspace ?? defaults.workspace,
    model: modelOf([config.model, defaults.model, entry?.model]),
    ownPromptMode: entry?.promptMode ?? defaults.promptMode,
    promptModeKey:
      entry?.promptMode !== undefined
        ? `${agentPath}.promptMode`
        : defaults.promptMode !== undefined
          ? "agents.defaults.promptMode"
          : "(built-in default)",
    subagents: {
      allowAgents: entry?.subagents?.allowAgents ?? defaults.subagents.allowAgents,
      allowAgentsKey:
        entry?.subagents?.allowAgents !== undefined
          ? `${agentPath}.subagents.allowAgents`
          : "agents.defaults.subagents.allowAgents",
      model: entry?.subagents?.model ?? defaults.subagents.model,
    },
    bootstrap: {
      files: [...(entry?.bootstrap?.files ?? defaults.bootstrap.files)],
      maxBytes: entry?.bootstrap?.maxBytes ?? defaults.bootstrap.maxBytes,
    },
    sandbox,
    sandboxKey,
    dockerKey,
    ignoredDockerKeys,
    tools: {
      profile,
      allow: agentList((t) => t.allow, "allow"),
      alsoAllow: agentList((t) => t.alsoAllow, "alsoAllow"),
      deny: agentList((t) => t.deny, "deny"),
      sandbox: {
        allow: sandboxList("allow"),
        alsoAllow: sandboxList("alsoAllow"),
        deny: sandboxList("deny"),
      },
      exec,
      callTimeoutSec,
    },
  };
}
