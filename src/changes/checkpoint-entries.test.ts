import { describe, expect, it } from "vitest";

import { CheckpointEntries } from "./checkpoint-entries.js";
import type { CheckpointListEntry } from "./checkpoints.js";

const entry = (name: string): CheckpointListEntry => ({
  v: 1,
  name,
  tree: "a".repeat(40),
  at: "2026-01-01T00:00:00.000Z",
  kind: "turn",
  changedFiles: 0,
});

describe("CheckpointEntries", () => {
  it("names the next of each prefix one past the highest taken, whatever the order or the other names", () => {
    const list = new CheckpointEntries(
      ["turn-2", "cp-1", "turn-10", "before-rollback-3", "turn-9", "mine", "x-turn-40"].map(entry),
    );
    expect(list.nextName("turn")).toBe("turn-11");
    expect(list.nextName("cp")).toBe("cp-2");
    expect(list.nextName("before-rollback")).toBe("before-rollback-4");
    expect(list.nextName("other")).toBe("other-1");
    // `x-turn-40` is no `turn-<n>`; `turn-05` is turn 5.
    expect(new CheckpointEntries([entry("turn-05")]).nextName("turn")).toBe("turn-6");
  });

  it("adds in place, in order, and counts what it adds", () => {
    const list = new CheckpointEntries([entry("turn-1")]);
    const items = list.items;
    for (let turn = 2; turn <= 1000; turn += 1) list.add([entry(list.nextName("turn"))]);
    // The same array grown, not a copy per turn: a session's turns cost n in all, not n².
    expect(list.items).toBe(items);
    expect(items).toHaveLength(1000);
    expect(items.at(-1)?.name).toBe("turn-1000");
    expect(list.nextName("turn")).toBe("turn-1001");
  });
});
