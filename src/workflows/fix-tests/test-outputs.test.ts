import { describe, expect, it } from "vitest";

import { filesWrittenBetween } from "./test-outputs.js";

describe("filesWrittenBetween", () => {
  it("names files created, rewritten or deleted, not those a step before left as they were", () => {
    const before = new Map([
      ["setup.log", "100644 aaa"],
      ["build/calc.o", "100644 bbb"],
      ["tmp/stale", "100644 ccc"],
    ]);
    const after = new Map([
      ["setup.log", "100644 aaa"],
      ["build/calc.o", "100644 ddd"],
      ["build/test_calc", "100755 eee"],
      ["tmp/stale", "deleted"],
    ]);
    expect(filesWrittenBetween(before, after)).toEqual([
      "build/calc.o",
      "build/test_calc",
      "tmp/stale",
    ]);
  });

  it("names a file put back to its seeded content (it drops out of the list)", () => {
    expect(filesWrittenBetween(new Map([["cache.db", "100644 aaa"]]), new Map())).toEqual([
      "cache.db",
    ]);
  });
});
