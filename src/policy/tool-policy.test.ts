import { describe, expect, it } from "vitest";

import { ConfigError, ExitCode, PolicyDeniedError } from "../common/index.js";
import { parseConfig } from "../config/index.js";
import { builtinToolCatalog, extendToolCatalog, resolveToolName } from "./tool-catalog.js";
import { evaluateToolPolicy } from "./tool-policy.js";
import { plan } from "./testing/plan-fixtures.js";

/** The coding profile: every tool but the session tools (group:sessions is opt-in). */
const all = ["exec", "process", "read", "write", "edit", "apply_patch", "ls", "find", "grep"];
const sessions = ["sessions_spawn", "sessions_send", "sessions_list", "sessions_history"];

function allowed(config: unknown, runTools?: { allow?: string[]; deny?: string[] }): string[] {
  return plan(config, runTools ? { runTools } : {}).tools.allowed;
}

function decision(config: unknown, tool: string, runTools?: { allow?: string[]; deny?: string[] }) {
  const found = plan(config, runTools ? { runTools } : {}).tools.decisions.find(
    (d) => d.tool === tool,
  );
  if (!found) throw new Error(`no decision for ${tool}`);
  return found;
}

describe("profiles, groups and aliases", () => {
  it.each([
    ["coding", all],
    ["minimal", ["read", "ls", "find", "grep"]],
    ["full", [...all, ...sessions]],
  ])("profile %s allows %j", (profile, expected) => {
    expect(allowed({ tools: { profile } })).toEqual(expected);
  });

  it("takes an agent's profile over the global one, and says which key decided", () => {
    const config = {
      tools: { profile: "full" },
      agents: { list: [{ id: "triage", tools: { profile: "minimal" } }] },
    };
    expect(allowed(config)).toEqual(["read", "ls", "find", "grep"]);
    expect(decision(config, "exec")).toMatchObject({
      allowed: false,
      layer: "profile",
      configKey: "agents.list[0].tools.profile",
    });
    expect(decision(config, "read")).toMatchObject({
      allowed: true,
      layer: "profile",
      configKey: "agents.list[0].tools.profile",
    });
  });

  it("resolves aliases and case in both directions", () => {
    expect(resolveToolName(builtinToolCatalog, "BASH")).toBe("exec");
    expect(resolveToolName(builtinToolCatalog, "Apply-Patch")).toBe("apply_patch");
    expect(resolveToolName(builtinToolCatalog, "exеc")).toBeUndefined(); // Cyrillic е
    expect(allowed({ tools: { deny: ["Bash"] } })).not.toContain("exec");
    expect(allowed({ tools: { deny: ["APPLY-PATCH"] } })).not.toContain("apply_patch");
    expect(allowed({ tools: { deny: ["GROUP:RUNTIME"] } })).toEqual(all.slice(2));
    // A glob that only matches the alias still covers the tool.
    expect(allowed({ tools: { deny: ["ba?h"] } })).not.toContain("exec");
  });
});

describe("layers: each one only narrows, deny always wins", () => {
  it.each([
    ["allow: [] means everything", { tools: { allow: [] } }, all],
    ["allow narrows", { tools: { allow: ["read", "grep"] } }, ["read", "grep"]],
    ["alsoAllow adds to allow", { tools: { allow: ["read"], alsoAllow: ["ls"] } }, ["read", "ls"]],
    [
      "deny beats allow",
      { tools: { allow: ["*"], deny: ["EXEC"] } },
      all.filter((t) => t !== "exec"),
    ],
    [
      "globs",
      { tools: { deny: ["*_patch", "e*"] } },
      ["process", "read", "write", "ls", "find", "grep"],
    ],
    ["? matches one character", { tools: { allow: ["?s", "gre?"] } }, ["ls", "grep"]],
    [
      "groups",
      { tools: { allow: ["group:fs"], deny: ["write", "edit", "apply_patch"] } },
      ["read", "ls", "find", "grep"],
    ],
    [
      "alsoAllow extends a profile",
      { tools: { profile: "minimal", alsoAllow: ["bash"] } },
      ["exec", "read", "ls", "find", "grep"],
    ],
    [
      "an agent's alsoAllow adds to the allow list it inherits",
      {
        agents: {
          defaults: { tools: { allow: ["read"] } },
          list: [{ id: "a", tools: { alsoAllow: ["write"] } }],
        },
      },
      ["read", "write"],
    ],
    [
      "an agent cannot widen a global allow list",
      { tools: { allow: ["read"] }, agents: { list: [{ id: "a", tools: { allow: ["*"] } }] } },
      ["read"],
    ],
    [
      "alsoAllow cannot beat a deny in any layer",
      {
        tools: { deny: ["exec"] },
        agents: { list: [{ id: "a", tools: { alsoAllow: ["exec"] } }] },
      },
      all.filter((t) => t !== "exec"),
    ],
    [
      "agent lists replace the defaults' lists",
      {
        agents: {
          defaults: { tools: { deny: ["exec"] } },
          list: [{ id: "a", tools: { deny: ["write"] } }],
        },
      },
      all.filter((t) => t !== "write"),
    ],
  ])("%s", (_name, config, expected) => {
    expect(allowed(config)).toEqual(expected);
  });

  it("records every layer that blocks a tool, first one as the decision", () => {
    const config = {
      tools: { deny: ["exec"], sandbox: { tools: { deny: ["bash"] } } },
      agents: { list: [{ id: "a", tools: { allow: ["group:fs"] } }] },
    };
    expect(decision(config, "exec", { deny: ["exec"] })).toEqual({
      tool: "exec",
      allowed: false,
      layer: "global",
      configKey: "tools.deny",
      reason: 'denied by "exec"',
      blockedBy: [
        { layer: "global", configKey: "tools.deny", reason: 'denied by "exec"' },
        {
          layer: "agent",
          configKey: "agents.list[0].tools.allow",
          reason: "not in the allow list [group:fs]",
        },
        { layer: "sandbox", configKey: "tools.sandbox.tools.deny", reason: 'denied by "bash"' },
        { layer: "run", configKey: "--deny-tools", reason: 'denied by "exec"' },
      ],
    });
  });

  it("names where an allowed tool came in", () => {
    expect(decision({ tools: { profile: "minimal", alsoAllow: ["exec"] } }, "exec")).toMatchObject({
      allowed: true,
      layer: "global",
      configKey: "tools.alsoAllow",
    });
    expect(
      decision(
        { agents: { list: [{ id: "a", tools: { profile: "minimal", alsoAllow: ["exec"] } }] } },
        "exec",
      ),
    ).toMatchObject({ allowed: true, layer: "agent", configKey: "agents.list[0].tools.alsoAllow" });
  });

  it("applies the sandbox tool policy only to sandboxed sessions", () => {
    const deny = { tools: { sandbox: { tools: { deny: ["exec", "process"] } } } };
    expect(allowed(deny)).toEqual(all.slice(2));
    expect(allowed({ ...deny, agents: { defaults: { sandbox: { mode: "off" } } } })).toEqual(all);
    const agentOwn = {
      agents: { list: [{ id: "a", tools: { sandbox: { tools: { allow: ["read"] } } } }] },
    };
    expect(decision(agentOwn, "write")).toMatchObject({
      layer: "agent-sandbox",
      configKey: "agents.list[0].tools.sandbox.tools.allow",
    });
  });

  it("applies the run's flags last", () => {
    expect(allowed({}, { allow: ["read", "write", "ls"], deny: ["write"] })).toEqual([
      "read",
      "ls",
    ]);
    expect(decision({}, "grep", { allow: ["read"] })).toMatchObject({
      layer: "run",
      configKey: "--allow-tools",
    });
  });
});

describe("unknown names and empty results", () => {
  it("warns once per unknown name, listing every key that uses it", () => {
    const result = plan({
      tools: { deny: ["frobnicate"], allow: ["*", "zz*"] },
      agents: {
        list: [{ id: "a", tools: { deny: ["FROBNICATE"], allow: ["group:nope", "read"] } }],
      },
    });
    expect(result.warnings).toEqual([
      'unknown tool name "zz*" in tools.allow (ignored)',
      'unknown tool name "frobnicate" in tools.deny, agents.list[0].tools.deny (ignored)',
      'unknown tool name "group:nope" in agents.list[0].tools.allow (ignored)',
    ]);
  });

  it("refuses tool entries with characters no tool name has", () => {
    expect(() => parseConfig({ tools: { deny: ["exеc"] } })).toThrow(ConfigError);
    expect(() => parseConfig({ tools: { deny: ["exec "] } })).toThrow(ConfigError);
  });

  it("stops before any model call when no tool is left, naming the keys", () => {
    let error: unknown;
    try {
      plan({ tools: { allow: ["read"], deny: ["read"] } });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(PolicyDeniedError);
    const denied = error as PolicyDeniedError;
    expect(denied.exitCode).toBe(ExitCode.policy);
    expect(denied.message).toMatch(
      /no tool is allowed for agent "main" in session agent:main:main/,
    );
    expect(denied.message).toMatch(/tools\.deny/);
    expect(denied.message).toMatch(/tools\.allow/);
    expect(denied.fix).toMatch(/cordon sandbox explain --agent main/);
  });

  it("an allow list of only unknown names allows nothing, not everything", () => {
    expect(() => plan({ tools: { allow: ["nothing-here"] } })).toThrow(PolicyDeniedError);
  });
});

describe("an embedder's catalog", () => {
  const catalog = extendToolCatalog(builtinToolCatalog, {
    tools: ["web_search", "Deploy"],
    groups: { "group:web": ["web_search"] },
    aliases: { search: "web_search" },
  });

  it("adds tools that full allows and coding does not", () => {
    expect(plan({ tools: { profile: "full" } }, { catalog }).tools.allowed).toEqual([
      ...all,
      ...sessions,
      "web_search",
      "Deploy",
    ]);
    expect(plan({}, { catalog }).tools.allowed).toEqual(all);
    expect(
      plan({ tools: { alsoAllow: ["group:web", "deploy"] } }, { catalog }).tools.allowed,
    ).toEqual([...all, "web_search", "Deploy"]);
    expect(
      plan({ tools: { profile: "full", deny: ["SEARCH"] } }, { catalog }).tools.allowed,
    ).not.toContain("web_search");
  });

  it("refuses names that would mean two things", () => {
    expect(() => extendToolCatalog(builtinToolCatalog, { tools: ["EXEC"] })).toThrow(/clashes/);
    expect(() => extendToolCatalog(builtinToolCatalog, { tools: ["Bash"] })).toThrow(/clashes/);
    expect(() => extendToolCatalog(builtinToolCatalog, { aliases: { sh: "nope" } })).toThrow(
      /unknown tool/,
    );
    expect(() => extendToolCatalog(builtinToolCatalog, { tools: ["a b"] })).toThrow(/not a valid/);
    expect(() => extendToolCatalog(builtinToolCatalog, { groups: { web: ["read"] } })).toThrow(
      /group:/,
    );
  });

  it("evaluates without throwing even for an unknown profile", () => {
    const result = evaluateToolPolicy({
      catalog: builtinToolCatalog,
      profile: { name: "nope", configKey: "x" },
      additions: [],
      layers: [],
    });
    expect(result.allowed).toEqual([]);
    expect(result.warnings[0]).toMatch(/unknown tool profile "nope"/);
  });
});
