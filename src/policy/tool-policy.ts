import { namesOf, resolveToolName, type ToolCatalog } from "./tool-catalog.js";

/** Where a tool decision was made, in evaluation order. */
export type ToolLayer =
  "profile" | "global" | "agent" | "sandbox" | "agent-sandbox" | "subagent" | "run";

/** One tool's outcome with its provenance: which layer, which config key, and why. */
export interface ToolDecision {
  /** The tool's registered name. */
  tool: string;
  allowed: boolean;
  /** Denied: the first layer that blocked it. Allowed: the layer that let it in. */
  layer: ToolLayer;
  /** The config key (or run flag) to change to flip the outcome. */
  configKey: string;
  reason: string;
  /** Denied tools: every layer that blocks it (all must change to allow it). */
  blockedBy?: { layer: ToolLayer; configKey: string; reason: string }[];
}

/** A list of tool entries as written in one config key. */
export interface ToolEntries {
  entries: readonly string[];
  /** e.g. `tools.deny`, `agents.list[1].tools.allow`, `--deny-tools` (a run flag). */
  configKey: string;
}

/** One narrowing layer: allow (empty = everything), alsoAllow (adds to allow), deny (wins). */
export interface ToolPolicyLayer {
  layer: ToolLayer;
  allow?: ToolEntries | undefined;
  alsoAllow?: ToolEntries | undefined;
  deny?: ToolEntries | undefined;
}

export interface ToolPolicyInput {
  catalog: ToolCatalog;
  profile: { name: string; configKey: string };
  /** `alsoAllow` keys that add to the profile (global and agent). */
  additions: readonly ToolEntries[];
  layers: readonly ToolPolicyLayer[];
}

export interface ToolPolicyResult {
  /** Allowed tools, in catalog order. */
  allowed: string[];
  /** One decision per catalog tool, in catalog order. */
  decisions: ToolDecision[];
  /** Unknown names, one line per name. */
  warnings: string[];
}

/** An entry's matcher: which tools it covers. Unknown entries match nothing and warn. */
function expandEntry(catalog: ToolCatalog, entry: string): { tools: Set<string>; known: boolean } {
  const lower = entry.toLowerCase();
  if (lower === "*") return { tools: new Set(catalog.tools), known: true };
  if (lower.startsWith("group:")) {
    const group = Object.entries(catalog.groups).find(([name]) => name.toLowerCase() === lower);
    const tools = new Set<string>();
    for (const member of group?.[1] ?? []) {
      const tool = resolveToolName(catalog, member);
      if (tool) tools.add(tool);
    }
    return { tools, known: group !== undefined };
  }
  if (/[*?]/.test(lower)) {
    const pattern = globPattern(lower);
    // Aliases count in both directions: `ba*` covers exec through `bash`.
    const tools = new Set(
      catalog.tools.filter((tool) => namesOf(catalog, tool).some((name) => pattern.test(name))),
    );
    return { tools, known: tools.size > 0 };
  }
  const tool = resolveToolName(catalog, lower);
  return { tools: new Set(tool ? [tool] : []), known: tool !== undefined };
}

/** `*` any run of characters, `?` one character; nothing else is special. */
function globPattern(glob: string): RegExp {
  const source = glob
    .split("")
    .map((ch) => (ch === "*" ? ".*" : ch === "?" ? "." : ch.replace(/[.+^${}()|[\]\\-]/g, "\\$&")))
    .join("");
  return new RegExp(`^${source}$`);
}

/** Evaluates the layered tool policy of DESIGN.md §4. Pure; never throws. */
export function evaluateToolPolicy(input: ToolPolicyInput): ToolPolicyResult {
  const { catalog } = input;
  const unknown = new Map<string, Set<string>>();
  const match = (list: ToolEntries | undefined, tool: string): string | undefined => {
    for (const entry of list?.entries ?? []) {
      if (expandEntry(catalog, entry).tools.has(tool)) return entry;
    }
    return undefined;
  };
  const noteUnknown = (list: ToolEntries | undefined) => {
    for (const entry of list?.entries ?? []) {
      if (expandEntry(catalog, entry).known) continue;
      const keys = unknown.get(entry.toLowerCase()) ?? new Set<string>();
      keys.add(list?.configKey ?? "");
      unknown.set(entry.toLowerCase(), keys);
    }
  };

  const profileEntries = catalog.profiles[input.profile.name as keyof ToolCatalog["profiles"]];
  const profile: ToolEntries = {
    entries: profileEntries ?? [],
    configKey: input.profile.configKey,
  };
  input.additions.forEach(noteUnknown);
  for (const layer of input.layers) {
    noteUnknown(layer.allow);
    noteUnknown(layer.alsoAllow);
    noteUnknown(layer.deny);
  }

  const decisions = catalog.tools.map((tool): ToolDecision => {
    const blockedBy: NonNullable<ToolDecision["blockedBy"]> = [];
    let admitted: { configKey: string; reason: string } | undefined;
    const fromProfile = match(profile, tool);
    if (fromProfile !== undefined) {
      admitted = {
        configKey: profile.configKey,
        reason: `in profile "${input.profile.name}" (${fromProfile === tool ? tool : `via ${fromProfile}`})`,
      };
    } else {
      for (const addition of input.additions) {
        const entry = match(addition, tool);
        if (entry !== undefined) {
          admitted = { configKey: addition.configKey, reason: `added by "${entry}"` };
          break;
        }
      }
    }
    if (!admitted) {
      blockedBy.push({
        layer: "profile",
        configKey: profile.configKey,
        reason: `not in profile "${input.profile.name}" and not in any alsoAllow`,
      });
    }
    for (const layer of input.layers) {
      const denied = match(layer.deny, tool);
      if (denied !== undefined && layer.deny) {
        blockedBy.push({
          layer: layer.layer,
          configKey: layer.deny.configKey,
          reason: `denied by "${denied}"`,
        });
        continue;
      }
      const allowList = layer.allow?.entries ?? [];
      if (allowList.length > 0 && layer.allow) {
        const inAllow = match(layer.allow, tool) ?? match(layer.alsoAllow, tool);
        if (inAllow === undefined) {
          blockedBy.push({
            layer: layer.layer,
            configKey: layer.allow.configKey,
            reason: `not in the allow list [${allowList.join(", ")}]`,
          });
        }
      }
    }
    const first = blockedBy[0];
    if (first) {
      return { tool, allowed: false, ...first, blockedBy };
    }
    const entered = admitted ?? { configKey: profile.configKey, reason: "" };
    return {
      tool,
      allowed: true,
      layer: entered.configKey === profile.configKey ? "profile" : layerOfKey(entered.configKey),
      configKey: entered.configKey,
      reason: entered.reason,
    };
  });

  const warnings: string[] = [];
  if (profileEntries === undefined) {
    warnings.push(
      `unknown tool profile "${input.profile.name}" in ${input.profile.configKey}: no tools come from it`,
    );
  }
  for (const [name, keys] of unknown) {
    warnings.push(`unknown tool name "${name}" in ${[...keys].join(", ")} (ignored)`);
  }
  return {
    allowed: decisions.filter((d) => d.allowed).map((d) => d.tool),
    decisions,
    warnings,
  };
}

/** `tools.alsoAllow` adds at the global layer, `agents…tools.alsoAllow` at the agent layer. */
function layerOfKey(configKey: string): ToolLayer {
  return configKey.startsWith("agents.") ? "agent" : "global";
}
