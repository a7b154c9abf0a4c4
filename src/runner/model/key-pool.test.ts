import { describe, expect, it } from "vitest";

import { apiKeysFromEnv, keyId } from "./api-keys.js";
import { afterRefusal, afterSuccess, keyOrder, maxCooldownMs } from "./key-pool.js";

const [a, b, c] = apiKeysFromEnv({ ANTHROPIC_API_KEYS: "sk-a, sk-b,,sk-c,sk-a" });

describe("apiKeysFromEnv", () => {
  it("reads ANTHROPIC_API_KEYS in order, trimmed, empties and duplicates dropped", () => {
    const keys = apiKeysFromEnv({ ANTHROPIC_API_KEYS: "sk-a, sk-b,,sk-c,sk-a" });
    expect(keys.map((key) => key.label)).toEqual([
      "ANTHROPIC_API_KEYS#1",
      "ANTHROPIC_API_KEYS#2",
      "ANTHROPIC_API_KEYS#4",
    ]);
    expect(keys.map((key) => key.secret)).toEqual(["sk-a", "sk-b", "sk-c"]);
    expect(keys[0]?.id).toBe(keyId("sk-a"));
    expect(keys[0]?.id).toMatch(/^[0-9a-f]{12}$/);
  });

  it("model.apiKeyEnv names the variables, and wins over ANTHROPIC_API_KEYS", () => {
    const keys = apiKeysFromEnv({ K1: "one", K2: "", K3: "three", ANTHROPIC_API_KEYS: "x,y" }, [
      "K1",
      "K2",
      "K3",
    ]);
    expect(keys.map((key) => key.label)).toEqual(["K1", "K3"]);
  });

  it("falls back to ANTHROPIC_API_KEY, and is empty when nothing is set", () => {
    expect(apiKeysFromEnv({ ANTHROPIC_API_KEY: "solo" }).map((key) => key.label)).toEqual([
      "ANTHROPIC_API_KEY",
    ]);
    expect(apiKeysFromEnv({})).toEqual([]);
  });

  it("names the unset variables when model.apiKeyEnv finds no key", () => {
    expect(() => apiKeysFromEnv({}, ["K1", "K2"])).toThrow(
      "model.apiKeyEnv names K1, K2, but none of them is set",
    );
  });
});

describe("keyOrder", () => {
  if (!a || !b || !c) throw new Error("three keys expected");
  const keys = [a, b, c];

  it("goes round-robin by last use: never used first, in the user's order", () => {
    expect(keyOrder(keys, {}, 1000).ready).toEqual([a, b, c]);
    const usages = { [a.id]: { lastUsed: 900 }, [c.id]: { lastUsed: 800 } };
    expect(keyOrder(keys, usages, 1000).ready).toEqual([b, c, a]);
  });

  it("puts keys that cool down last, the one ready soonest first", () => {
    const usages = {
      [a.id]: { lastUsed: 1, cooldownUntil: 5000 },
      [b.id]: { lastUsed: 2, cooldownUntil: 3000 },
      [c.id]: { lastUsed: 999 },
    };
    expect(keyOrder(keys, usages, 1000)).toEqual({ ready: [c], cooling: [b, a] });
    expect(keyOrder(keys, usages, 4000)).toEqual({ ready: [b, c], cooling: [a] });
  });
});

describe("cooldowns", () => {
  it("step 10 s, 60 s, 300 s on refusals in a row, and stay at 300 s", () => {
    let usage = {};
    const waits: number[] = [];
    for (let refusal = 0; refusal < 4; refusal++) {
      usage = afterRefusal(usage, 0);
      waits.push((usage as { cooldownUntil: number }).cooldownUntil);
    }
    expect(waits).toEqual([10_000, 60_000, 300_000, 300_000]);
  });

  it("honour a longer retry-after, up to 300 s", () => {
    expect(afterRefusal({}, 0, 120_000).cooldownUntil).toBe(120_000);
    expect(afterRefusal({}, 0, 3_600_000).cooldownUntil).toBe(maxCooldownMs);
    expect(afterRefusal({}, 0, 1).cooldownUntil).toBe(10_000);
  });

  it("are forgotten after a request goes through", () => {
    const refused = afterRefusal(afterRefusal({ lastUsed: 5 }, 0), 0);
    expect(afterSuccess(refused)).toEqual({ lastUsed: 5 });
    expect(afterRefusal(afterSuccess(refused), 0).cooldownUntil).toBe(10_000);
  });
});
