import { describe, expect, it } from "vitest";

import { explainPlan } from "./explain.js";
import type { RunPlan } from "./plan-run.js";
import {
  childSandboxRefusal,
  isSubagentSessionKey,
  spawnRefusal,
  subagentSessionKey,
  visibilityRefusal,
  type SessionRequester,
} from "./subagent-policy.js";
import { plan } from "./testing/plan-fixtures.js";

const requester = (result: RunPlan): SessionRequester => ({
  agentId: result.agent.id,
  sessionKey: result.sessionKey,
  sandboxed: result.sandbox.enabled,
  subagents: result.subagents,
});

const twoAgents = (
  mainOwn: Record<string, unknown> = {},
  defaults: Record<string, unknown> = {},
) => ({
  agents: {
    defaults: { sandbox: { mode: "non-main" }, ...defaults },
    list: [
      { id: "main", default: true, ...mainOwn },
      { id: "Helper Bot" },
      { id: "hostly", sandbox: { mode: "off" } },
    ],
  },
});

describe("spawnRefusal", () => {
  it("lets an agent spawn only itself by default, naming the key otherwise", () => {
    const main = requester(plan(twoAgents()));
    expect(spawnRefusal(main, "main")).toBeUndefined();
    const refused = spawnRefusal(main, "helper-bot");
    expect(refused).toContain('Agent "helper-bot" is not one this session may start');
    expect(refused).toContain("agents.defaults.subagents.allowAgents");
  });

  it("takes the agent's own allowAgents (normalised) over the defaults, and * for any", () => {
    const own = requester(
      plan(twoAgents({ subagents: { allowAgents: ["Helper Bot"] } }), { agentId: "main" }),
    );
    expect(spawnRefusal(own, "helper-bot")).toBeUndefined();
    expect(spawnRefusal(own, "main")).toContain("agents.list[0].subagents.allowAgents");
    const any = requester(plan(twoAgents({}, { subagents: { allowAgents: ["*"] } })));
    expect(spawnRefusal(any, "hostly")).toBeUndefined();
  });

  it("refuses every spawn from a subagent's session (one level only)", () => {
    const child = plan(twoAgents({}, { subagents: { allowAgents: ["*"] } }), {
      sessionKey: subagentSessionKey("main", "abc123"),
    });
    expect(child.subagents.isSubagentSession).toBe(true);
    expect(spawnRefusal(requester(child), "main")).toMatch(/cannot start subagents of its own/);
    // The policy also keeps the tool from it, so the model is not even offered it.
    const full = plan(
      { ...twoAgents(), tools: { profile: "full" } },
      { sessionKey: subagentSessionKey("main", "abc123") },
    );
    expect(full.tools.allowed).not.toContain("sessions_spawn");
    expect(full.tools.allowed).toContain("sessions_list");
    expect(full.tools.decisions.find((d) => d.tool === "sessions_spawn")).toMatchObject({
      allowed: false,
      layer: "subagent",
    });
  });
});

describe("childSandboxRefusal", () => {
  it("refuses an unsandboxed child to a sandboxed session, naming the child's mode key", () => {
    const sandboxed = requester(plan(twoAgents(), { sessionKey: "work" }));
    expect(sandboxed.sandboxed).toBe(true);
    const child = { agentId: "hostly", sandboxed: false, modeKey: "agents.list[2].sandbox.mode" };
    expect(childSandboxRefusal(sandboxed, child)).toContain(
      "agents.list[2].sandbox.mode does not sandbox it",
    );
    expect(childSandboxRefusal(sandboxed, { ...child, sandboxed: true })).toBeUndefined();
    // The unsandboxed main session already runs on the host: a host child takes nothing away.
    expect(childSandboxRefusal(requester(plan(twoAgents())), child)).toBeUndefined();
  });
});

describe("visibilityRefusal", () => {
  it("shows a sandboxed session only what it spawned, unless visibility is all", () => {
    const sandboxed = requester(plan(twoAgents(), { sessionKey: "work" }));
    expect(
      visibilityRefusal(sandboxed, { sessionKey: "agent:main:main", spawnedByRequester: false }),
    ).toContain('agents.defaults.sandbox.sessionToolsVisibility is "spawned"');
    expect(
      visibilityRefusal(sandboxed, {
        sessionKey: "agent:main:sub:1",
        spawnedByRequester: true,
      }),
    ).toBeUndefined();
    const all = requester(
      plan(twoAgents({}, { sandbox: { mode: "non-main", sessionToolsVisibility: "all" } }), {
        sessionKey: "work",
      }),
    );
    expect(
      visibilityRefusal(all, { sessionKey: "agent:main:main", spawnedByRequester: false }),
    ).toBeUndefined();
  });

  it("keeps other agents' sessions out unless tools.agentToAgent allows them", () => {
    const main = requester(plan(twoAgents()));
    const other = { sessionKey: "agent:helper-bot:x", spawnedByRequester: false };
    expect(visibilityRefusal(main, other)).toContain("tools.agentToAgent.enabled is false");
    expect(visibilityRefusal(main, { ...other, spawnedByRequester: true })).toBeUndefined();
    const listed = requester(
      plan({ ...twoAgents(), tools: { agentToAgent: { enabled: true, allow: ["hostly"] } } }),
    );
    expect(visibilityRefusal(listed, other)).toContain("not in tools.agentToAgent.allow");
    const any = requester(
      plan({ ...twoAgents(), tools: { agentToAgent: { enabled: true, allow: ["*"] } } }),
    );
    expect(visibilityRefusal(any, other)).toBeUndefined();
  });
});

describe("the plan and explain", () => {
  it("gives a subagent session the minimal prompt unless the agent sets one", () => {
    const key = subagentSessionKey("main", "abc");
    expect(isSubagentSessionKey(key)).toBe(true);
    expect(isSubagentSessionKey("agent:main:subtle")).toBe(false);
    expect(plan(twoAgents(), { sessionKey: key }).agent.promptMode).toBe("minimal");
    expect(plan(twoAgents()).agent.promptMode).toBe("full");
    expect(plan(twoAgents({ promptMode: "none" }), { sessionKey: key }).agent.promptMode).toBe(
      "none",
    );
  });

  it("keeps the session tools out of the coding profile and in group:sessions", () => {
    expect(plan(twoAgents()).tools.allowed).not.toContain("sessions_spawn");
    const opted = plan({ ...twoAgents(), tools: { alsoAllow: ["group:sessions"] } });
    expect(opted.tools.allowed).toEqual(
      expect.arrayContaining([
        "sessions_spawn",
        "sessions_send",
        "sessions_list",
        "sessions_history",
      ]),
    );
  });

  it("shows whom a session may spawn, where each child runs and what its tools see", () => {
    const text = explainPlan(
      plan(
        {
          ...twoAgents({}, { subagents: { allowAgents: ["*"], maxConcurrent: 3 } }),
          tools: { alsoAllow: ["group:sessions"] },
        },
        { sessionKey: "work" },
      ),
    );
    expect(text).toContain("may spawn * (agents.defaults.subagents.allowAgents)");
    expect(text).toMatch(/helper-bot: sandboxed \(agents.defaults.sandbox.mode "non-main"\)/);
    expect(text).toMatch(
      /hostly: NOT sandboxed \(agents.list\[2\].sandbox.mode "off"\), refused from this sandboxed session/,
    );
    expect(text).toContain("lane of 3 (agents.defaults.subagents.maxConcurrent)");
    expect(text).toContain("see only the subagents this session spawned");
    expect(text).toContain("tools.agentToAgent.enabled false");
  });
});
