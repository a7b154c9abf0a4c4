import { describe, expect, it } from "vitest";
import { ModelApiError, type ModelErrorKind } from "../model/index.js";
import { nextRecovery, type RecoveryState } from "./recovery.js";

const fresh: RecoveryState = {
  retried: false,
  thinking: undefined,
  compactions: 0,
  reset: false,
  fallbacksLeft: 1,
};
const limits = { maxCompactions: 3, retryDelayMs: 2000, maxRetryDelayMs: 60_000 };

function error(kind: ModelErrorKind, message = `${kind} happened`, retryAfterMs?: number) {
  return new ModelApiError(message, { kind, retryAfterMs });
}

describe("nextRecovery", () => {
  it("compacts an overflow up to the limit, then resets once, then fails with context_overflow", () => {
    const overflow = error("context_overflow", "prompt is too long");
    expect(nextRecovery(overflow, fresh, limits)).toEqual({ action: "compact" });
    expect(nextRecovery(overflow, { ...fresh, compactions: 2 }, limits)).toEqual({
      action: "compact",
    });
    expect(nextRecovery(overflow, { ...fresh, compactions: 3 }, limits)).toEqual({
      action: "reset",
    });
    expect(nextRecovery(overflow, { ...fresh, compactions: 3, reset: true }, limits)).toMatchObject(
      { action: "fail", status: "context_overflow" },
    );
  });

  it("never falls back on an overflow: another model would not fit it either", () => {
    const spent = { ...fresh, compactions: 3, reset: true, fallbacksLeft: 2 };
    expect(nextRecovery(error("context_overflow"), spent, limits).action).toBe("fail");
  });

  it("retries a transient error once, honouring retry-after up to the cap, then falls back", () => {
    expect(nextRecovery(error("overloaded"), fresh, limits)).toEqual({
      action: "retry",
      delayMs: 2000,
    });
    expect(nextRecovery(error("rate_limited", "429", 5000), fresh, limits)).toEqual({
      action: "retry",
      delayMs: 5000,
    });
    expect(nextRecovery(error("rate_limited", "429", 3_600_000), fresh, limits)).toEqual({
      action: "retry",
      delayMs: 60_000,
    });
    expect(nextRecovery(error("overloaded"), { ...fresh, retried: true }, limits)).toEqual({
      action: "fallback",
    });
  });

  it("fails with the API's message and fix when nothing is left to try", () => {
    const spent = { ...fresh, retried: true, fallbacksLeft: 0 };
    expect(nextRecovery(error("server", "internal error"), spent, limits)).toMatchObject({
      action: "fail",
      status: "model_error",
      message: "internal error.",
    });
  });

  it("never retries or falls back on billing and auth errors", () => {
    for (const kind of ["billing", "auth"] as const) {
      expect(nextRecovery(error(kind), fresh, limits)).toMatchObject({ action: "fail" });
    }
  });

  it("steps thinking down one level at a time on a thinking error, then stops asking", () => {
    const thinkingError = error("invalid_request", "thinking.budget_tokens: too large");
    expect(nextRecovery(thinkingError, { ...fresh, thinking: "xhigh" }, limits)).toEqual({
      action: "downgrade-thinking",
      to: "high",
    });
    expect(nextRecovery(thinkingError, { ...fresh, thinking: "minimal" }, limits)).toEqual({
      action: "downgrade-thinking",
      to: undefined,
    });
    expect(
      nextRecovery(thinkingError, { ...fresh, thinking: { budgetTokens: 2048 } }, limits),
    ).toEqual({ action: "downgrade-thinking", to: undefined });
    // Thinking already off: the error is about something else; the normal path applies.
    expect(nextRecovery(thinkingError, fresh, limits)).toEqual({ action: "fallback" });
  });

  it("reports a role-ordering error as such, without a fallback or a model-name hint", () => {
    for (const message of [
      'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row',
      "messages.3.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_1. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
    ]) {
      const decision = nextRecovery(error("invalid_request", message), fresh, limits);
      expect(decision).toMatchObject({ action: "fail", status: "model_error" });
      if (decision.action !== "fail") continue;
      expect(decision.message).toMatch(/out of order/);
      expect(decision.fix).not.toMatch(/model name/);
    }
  });

  it("falls back on another invalid request (an unknown model id)", () => {
    expect(nextRecovery(error("invalid_request", "model: not found"), fresh, limits)).toEqual({
      action: "fallback",
    });
  });
});
