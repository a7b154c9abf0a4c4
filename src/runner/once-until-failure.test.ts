import { describe, expect, it } from "vitest";

import { onceUntilFailure } from "./once-until-failure.js";

describe("onceUntilFailure", () => {
  it("makes the value once and shares it between callers, concurrent ones included", async () => {
    let made = 0;
    const get = onceUntilFailure(() => Promise.resolve(++made));
    expect(await Promise.all([get(), get()])).toEqual([1, 1]);
    expect(await get()).toBe(1);
    expect(made).toBe(1);
  });

  it("does not keep a failure: the next call tries again", async () => {
    let calls = 0;
    const get = onceUntilFailure(() => {
      calls += 1;
      if (calls === 1) throw new Error("config typo");
      return Promise.resolve("loaded");
    });
    await expect(get()).rejects.toThrow("config typo");
    expect(await get()).toBe("loaded");
    expect(await get()).toBe("loaded");
    expect(calls).toBe(2);
  });
});
