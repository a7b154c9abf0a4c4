import { describe, expect, it } from "vitest";

import { LruMap } from "./lru-map.js";

describe("LruMap", () => {
  it("forgets the least recently read or set entry beyond its capacity", () => {
    const map = new LruMap<string, number>(2);
    map.set("a", 1).set("b", 2);
    // Read, "a" is now the most recent: "b" goes when "c" comes.
    expect(map.get("a")).toBe(1);
    map.set("c", 3);
    expect(map.size).toBe(2);
    expect(map.get("b")).toBeUndefined();
    expect(map.get("a")).toBe(1);
    expect(map.get("c")).toBe(3);
    // Set again, an entry is the most recent and holds its new value.
    map.set("a", 10).set("d", 4);
    expect([map.get("c"), map.get("a"), map.get("d")]).toEqual([undefined, 10, 4]);
  });

  it("keeps an undefined value as a value, deletes, and refuses a capacity under one", () => {
    const map = new LruMap<string, number | undefined>(1);
    map.set("a", undefined);
    expect(map.size).toBe(1);
    expect(map.delete("a")).toBe(true);
    expect(map.size).toBe(0);
    expect(() => new LruMap(0)).toThrow(RangeError);
  });
});
