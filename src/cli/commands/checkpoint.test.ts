import { describe, expect, it } from "vitest";

import { ConfigError } from "../../common/index.js";
import { formatCheckpoints, rollbackTarget, uncountedLine } from "./checkpoint.js";

describe("rollback's target", () => {
  it("is a name or --turn -N, exactly one", () => {
    expect(rollbackTarget("before", undefined)).toEqual({ name: "before" });
    expect(rollbackTarget(undefined, "-2")).toEqual({ turn: -2 });
    for (const [name, turn] of [
      ["a", "-1"],
      [undefined, undefined],
      [undefined, "1"],
      [undefined, "-0"],
      [undefined, "-1.5"],
      [undefined, "last"],
    ] as const) {
      expect(() => rollbackTarget(name, turn)).toThrow(ConfigError);
    }
  });
});

describe("the checkpoint listing", () => {
  it("shows name, time, files changed and why, a missed turn in its place, with the agent's text made printable", () => {
    const text = formatCheckpoints([
      {
        v: 1,
        name: "turn-1",
        tree: "a".repeat(40),
        at: "2026-11-27T03:00:00.000Z",
        kind: "turn",
        turn: 1,
        sessionKey: "agent:main:s\u001b[2J",
        changedFiles: 0,
      },
      {
        v: 1,
        name: "turn-2",
        at: "2026-11-27T03:00:30.000Z",
        kind: "turn",
        turn: 2,
        sessionKey: "agent:main:s",
        missed: "the inspector did not start\u001b[2J",
      },
      {
        v: 1,
        name: "mine",
        tree: "b".repeat(40),
        at: "2026-11-27T03:01:00.000Z",
        kind: "named",
        changedFiles: 12,
      },
    ]);
    expect(text.split("\n")[0]).toMatch(/^NAME\s+TAKEN\s+CHANGED\s+WHY$/);
    expect(text).toMatch(/^turn-1 +2026-11-27T03:00:00.000Z +0 +before turn 1 of agent:main:s/m);
    expect(text).toMatch(
      /^turn-2 +2026-11-27T03:00:30.000Z +missed +before turn 2 of agent:main:s: not recorded \(the inspector did not start.*\), so no rollback returns here$/m,
    );
    expect(text).toMatch(/^mine +2026-11-27T03:01:00.000Z +12 +cordon checkpoint$/m);
    expect(text).not.toContain("\u001b");
  });
});

describe("the line under a listing with uncounted turns", () => {
  it("gives the reason it was told, made printable, and otherwise the cause that has no error", () => {
    expect(
      uncountedLine(
        "the sandbox image cordon-sandbox:0123456789ab is not on the Docker engine (run `cordon image build`)",
      ),
    ).toBe(
      "a turn's changed files are counted when listed, and that failed: the sandbox image cordon-sandbox:0123456789ab is not on the Docker engine (run `cordon image build`)",
    );
    expect(uncountedLine("odd\u001b[2J")).toBe(
      "a turn's changed files are counted when listed, and that failed: odd\\u001b[2J",
    );
    expect(uncountedLine(undefined)).toBe(
      "a turn's changed files are counted when listed, and its checkpoint's tree is gone from the store",
    );
  });
});
