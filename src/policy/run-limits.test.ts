import { describe, expect, it } from "vitest";

import { explainPlan } from "./explain.js";
import { plan } from "./testing/plan-fixtures.js";

const hostMode = { sandbox: { mode: "off" } };

describe("the run's limits are decided in the plan", () => {
  it("takes the built-in defaults, each named as such", () => {
    const { limits } = plan({ agents: { defaults: hostMode } });
    expect(limits).toEqual({
      maxTurns: 50,
      maxOutputTokens: 8192,
      toolTimeoutMs: 600_000,
      contextWindowTokens: 200_000,
      keys: {
        maxTurns: "built-in default; --max-turns",
        maxTokens: "none",
        timeoutMs: "none; --timeout",
        maxOutputTokens: "built-in default",
        toolTimeoutMs: "tools.callTimeoutSec",
        contextWindowTokens: "built-in default; set agents.defaults.contextWindow",
        thinking: "built-in default; set agents.defaults.thinking",
      },
    });
  });

  it("takes the agent's own settings over the defaults', with the key that set each", () => {
    const config = {
      tools: { callTimeoutSec: 120 },
      agents: {
        defaults: { ...hostMode, thinking: "low", contextWindow: 64_000 },
        list: [{ id: "plain" }, { id: "deep", thinking: "high", tools: { callTimeoutSec: 30 } }],
      },
    };
    expect(plan(config).limits).toMatchObject({
      thinking: "low",
      contextWindowTokens: 64_000,
      toolTimeoutMs: 120_000,
      keys: {
        thinking: "agents.defaults.thinking",
        contextWindowTokens: "agents.defaults.contextWindow",
        toolTimeoutMs: "tools.callTimeoutSec",
      },
    });
    expect(plan(config, { agentId: "deep" }).limits).toMatchObject({
      thinking: "high",
      contextWindowTokens: 64_000,
      toolTimeoutMs: 30_000,
      keys: {
        thinking: "agents.list[1].thinking",
        toolTimeoutMs: "agents.list[1].tools.callTimeoutSec",
      },
    });
  });

  it("puts the run's own flags over every config layer", () => {
    const config = { agents: { defaults: { ...hostMode, thinking: "low" } } };
    const { limits } = plan(config, {
      runLimits: { maxTurns: 7, timeoutMs: 90_000, thinking: "medium", maxTokens: 5000 },
    });
    expect(limits).toMatchObject({
      maxTurns: 7,
      timeoutMs: 90_000,
      thinking: "medium",
      maxTokens: 5000,
      keys: {
        maxTurns: "--max-turns",
        timeoutMs: "--timeout",
        thinking: "--thinking",
        maxTokens: "the run's limits.maxTokens",
      },
    });
  });

  it("counts no turns for a runtime that keeps its own, unless the run sets them", () => {
    const config = { agents: { defaults: { runtime: "claude-code" } } };
    const { limits } = plan(config);
    expect(limits.maxTurns).toBeUndefined();
    expect(limits.keys.maxTurns).toMatch(/claude-code's own/);
    expect(plan(config, { runLimits: { maxTurns: 3 } }).limits.maxTurns).toBe(3);
  });

  it("explain shows each limit with its key", () => {
    const text = explainPlan(
      plan(
        { agents: { defaults: { ...hostMode, contextWindow: 32_000 } } },
        {
          runLimits: { timeoutMs: 60_000 },
        },
      ),
    );
    expect(text).toContain("  turns        50 (built-in default; --max-turns)\n");
    expect(text).toContain("  time         60 s (--timeout)\n");
    expect(text).toContain("  tool call    600 s (tools.callTimeoutSec)\n");
    expect(text).toContain("  context      32000 tokens (agents.defaults.contextWindow)\n");
    expect(text).toContain("  thinking     off (built-in default; set agents.defaults.thinking)\n");
  });
});
