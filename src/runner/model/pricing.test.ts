import { describe, expect, it } from "vitest";
import { CostMeter, callCostUsd, formatCost } from "./pricing.js";
import type { ModelUsage } from "./types.js";

const usage = (inputTokens: number, outputTokens: number, cacheRead = 0, cacheWrite = 0) =>
  ({
    inputTokens,
    outputTokens,
    cacheReadTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
  }) satisfies ModelUsage;

describe("pricing", () => {
  it("prices each token kind at its own rate, by the id the API answers with", () => {
    // Sonnet 4.5: $3 in, $15 out, $3.75 cache write, $0.30 cache read per million.
    const cost = callCostUsd(
      "claude-sonnet-4-5-20250929",
      usage(1_000_000, 100_000, 2_000_000, 400_000),
    );
    expect(cost).toBeCloseTo(3 + 1.5 + 1.5 + 0.6, 10);
    expect(callCostUsd("claude-sonnet-4-5", usage(1_000_000, 0))).toBe(3);
    expect(callCostUsd("claude-opus-4-1-20250805", usage(0, 1_000_000))).toBe(75);
    expect(callCostUsd("claude-opus-4-8", usage(0, 1_000_000))).toBe(25);
  });

  it("bills a long Haiku 5.5 prompt at its higher band, counting cached tokens as prompt", () => {
    expect(callCostUsd("claude-haiku-5-5", usage(100_000, 1_000_000))).toBeCloseTo(0.01 + 0.5, 10);
    // 60k fresh + 50k read = 110k prompt tokens: every token of the call at the long-prompt rates.
    expect(callCostUsd("claude-haiku-5-5", usage(60_000, 1_000_000, 50_000))).toBeCloseTo(
      0.03 + 2.5 + 0.0025,
      10,
    );
  });

  it("has no price for an id it does not know, rather than a near match", () => {
    expect(callCostUsd("claude-sonnet-4-5-preview", usage(1, 1))).toBeUndefined();
    expect(callCostUsd("scripted", usage(1, 1))).toBeUndefined();
    expect(callCostUsd("gpt-oss-120b", usage(1, 1))).toBeUndefined();
  });

  it("sums a run over its models; one unknown model makes the whole cost unknown, with why", () => {
    const meter = new CostMeter();
    meter.add("claude-sonnet-4-5-20250929", usage(10_000, 2_000));
    meter.add("claude-haiku-4-5-20251001", usage(10_000, 2_000));
    expect(meter.cost).toEqual({ usd: 0.08 }); // 0.03 + 0.03 in, 0.01 + 0.01 out
    meter.add("my-gateway-model", usage(1, 1));
    const cost = meter.cost;
    expect(cost.usd).toBeNull();
    expect(cost.reason).toMatch(/no price for "my-gateway-model"/);
  });

  it("formats an estimate for people", () => {
    expect(formatCost({ usd: 0.01234 })).toBe("~$0.0123");
    expect(formatCost({ usd: 1.371 })).toBe("~$1.37");
    expect(formatCost({ usd: null, reason: "x" })).toBe("cost unknown");
  });
});
