import type { ToolProfile } from "../config/index.js";

/**
 * The names the tool policy can talk about: tools, groups, aliases and profiles (DESIGN.md §4).
 * Names are matched case-insensitively; the catalog keeps each tool's registered spelling.
 */
export interface ToolCatalog {
  /** Every tool, in its registered spelling. */
  readonly tools: readonly string[];
  /** `group:<name>` → tool names. */
  readonly groups: Readonly<Record<string, readonly string[]>>;
  /** Alternative name → tool name (`bash` → `exec`). */
  readonly aliases: Readonly<Record<string, string>>;
  /** Profile → entries (tool names, groups, or `*` for every tool). */
  readonly profiles: Readonly<Record<ToolProfile, readonly string[]>>;
}

export const builtinToolNames = [
  "exec",
  "process",
  "read",
  "write",
  "edit",
  "apply_patch",
  "ls",
  "find",
  "grep",
  "sessions_spawn",
  "sessions_send",
  "sessions_list",
  "sessions_history",
] as const;

export const builtinToolCatalog: ToolCatalog = Object.freeze({
  tools: builtinToolNames,
  groups: {
    "group:fs": ["read", "write", "edit", "apply_patch", "ls", "find", "grep"],
    "group:runtime": ["exec", "process"],
    // Not in "coding": every spawn is another model run (and container); opt in with alsoAllow.
    "group:sessions": ["sessions_spawn", "sessions_send", "sessions_list", "sessions_history"],
  },
  aliases: { bash: "exec", "apply-patch": "apply_patch" },
  profiles: {
    minimal: ["read", "ls", "find", "grep"],
    coding: ["group:fs", "group:runtime"],
    full: ["*"],
  },
});

const toolNamePattern = /^[A-Za-z0-9_-]{1,64}$/;

export interface ToolCatalogExtension {
  /** Extra tools (an embedder's custom tools); names as the model API allows: [A-Za-z0-9_-]{1,64}. */
  tools?: readonly string[];
  /** Extra or extended groups (`group:web` → [...]). */
  groups?: Readonly<Record<string, readonly string[]>>;
  aliases?: Readonly<Record<string, string>>;
}

/**
 * A catalog with an embedder's tools added. Refuses names that clash with an existing tool,
 * alias or group when compared case-insensitively, so no entry can mean two things.
 */
export function extendToolCatalog(base: ToolCatalog, extension: ToolCatalogExtension): ToolCatalog {
  const taken = new Map<string, string>();
  const claim = (name: string, what: string) => {
    const key = name.toLowerCase();
    const previous = taken.get(key);
    if (previous) throw new TypeError(`tool catalog: ${what} "${name}" clashes with ${previous}`);
    taken.set(key, `${what} "${name}"`);
  };
  for (const tool of base.tools) claim(tool, "tool");
  for (const alias of Object.keys(base.aliases)) claim(alias, "alias");

  const tools = [...base.tools];
  for (const tool of extension.tools ?? []) {
    if (!toolNamePattern.test(tool)) {
      throw new TypeError(`tool catalog: "${tool}" is not a valid tool name ([A-Za-z0-9_-]{1,64})`);
    }
    claim(tool, "tool");
    tools.push(tool);
  }
  const known = new Set(tools.map((t) => t.toLowerCase()));
  const aliases = { ...base.aliases };
  for (const [alias, target] of Object.entries(extension.aliases ?? {})) {
    if (!known.has(target.toLowerCase())) {
      throw new TypeError(`tool catalog: alias "${alias}" points at unknown tool "${target}"`);
    }
    claim(alias, "alias");
    aliases[alias] = target;
  }
  const groups: Record<string, readonly string[]> = { ...base.groups };
  for (const [group, members] of Object.entries(extension.groups ?? {})) {
    if (!group.startsWith("group:")) {
      throw new TypeError(`tool catalog: group "${group}" must be named "group:<name>"`);
    }
    const unknown = members.filter((m) => !known.has(m.toLowerCase()));
    if (unknown.length > 0) {
      throw new TypeError(
        `tool catalog: group "${group}" names unknown tools ${unknown.join(", ")}`,
      );
    }
    const existing = groups[group.toLowerCase()] ?? [];
    groups[group.toLowerCase()] = [...new Set([...existing, ...members])];
  }
  return Object.freeze({ tools, groups, aliases, profiles: base.profiles });
}

/** The registered spelling of a tool name or alias (case-insensitive), or undefined. */
export function resolveToolName(catalog: ToolCatalog, name: string): string | undefined {
  const lower = name.toLowerCase();
  const direct = catalog.tools.find((tool) => tool.toLowerCase() === lower);
  if (direct) return direct;
  const alias = Object.entries(catalog.aliases).find(([a]) => a.toLowerCase() === lower);
  return alias
    ? catalog.tools.find((tool) => tool.toLowerCase() === alias[1].toLowerCase())
    : undefined;
}

/** A tool's names for matching: its own and every alias of it, lowercased. */
export function namesOf(catalog: ToolCatalog, tool: string): string[] {
  const lower = tool.toLowerCase();
  return [
    lower,
    ...Object.entries(catalog.aliases)
      .filter(([, target]) => target.toLowerCase() === lower)
      .map(([alias]) => alias.toLowerCase()),
  ];
}
