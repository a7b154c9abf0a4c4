import Anthropic from "@anthropic-ai/sdk";
import { describe, expect, it } from "vitest";
import { maxRetryWaitMs, transportRetryWaitMs } from "./anthropic-retry.js";

function apiError(status: number, headers: Record<string, string> = {}) {
  const body = { type: "error", error: { type: "x", message: "m" } };
  return Anthropic.APIError.generate(status, body, undefined, new Headers(headers));
}

/** What the SDK throws for an `error` event inside an SSE stream: no status. */
function streamError(type: "overloaded_error" | "invalid_request_error") {
  const body = { type: "error", error: { type, message: "m" } };
  return new Anthropic.APIError(undefined, body, undefined, new Headers(), type);
}

const noJitter = () => 0;

describe("transportRetryWaitMs", () => {
  it("backs off 0.5 s, 1 s, 2 s … up to 8 s, with at most 25 % jitter", () => {
    const error = apiError(529);
    expect([1, 2, 3, 4, 5, 6].map((n) => transportRetryWaitMs(error, n, noJitter))).toEqual([
      500, 1000, 2000, 4000, 8000, 8000,
    ]);
    expect(transportRetryWaitMs(error, 1, () => 0.999)).toBeGreaterThanOrEqual(375);
  });

  it("takes the server's wait (retry-after-ms, retry-after), capped", () => {
    expect(transportRetryWaitMs(apiError(429, { "retry-after-ms": "250" }), 1)).toBe(250);
    expect(transportRetryWaitMs(apiError(429, { "retry-after": "3" }), 1)).toBe(3000);
    expect(transportRetryWaitMs(apiError(429, { "retry-after": "3600" }), 1)).toBe(maxRetryWaitMs);
  });

  it("retries what the SDK retries, lets x-should-retry overrule, and refuses 4xx", () => {
    for (const status of [408, 409, 429, 500, 503, 529]) {
      expect(transportRetryWaitMs(apiError(status), 1), String(status)).toBeDefined();
    }
    for (const status of [400, 401, 403, 404, 413]) {
      expect(transportRetryWaitMs(apiError(status), 1), String(status)).toBeUndefined();
    }
    expect(transportRetryWaitMs(apiError(503, { "x-should-retry": "false" }), 1)).toBeUndefined();
    expect(transportRetryWaitMs(apiError(400, { "x-should-retry": "true" }), 1)).toBeDefined();
  });

  it("retries connection failures and in-stream overloads, never an abort", () => {
    expect(transportRetryWaitMs(new Anthropic.APIConnectionError({}), 1)).toBeDefined();
    expect(transportRetryWaitMs(streamError("overloaded_error"), 1)).toBeDefined();
    expect(transportRetryWaitMs(streamError("invalid_request_error"), 1)).toBeUndefined();
    expect(transportRetryWaitMs(new Anthropic.APIUserAbortError(), 1)).toBeUndefined();
    expect(transportRetryWaitMs(new Error("bug"), 1)).toBeUndefined();
  });
});
