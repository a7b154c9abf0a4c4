import { describe, expect, it } from "vitest";

import { ImageError } from "../../common/index.js";
import { rollbackNote, uncountedReason, type SessionRollback } from "./session-checkpoints.js";

const outcome = (extra: Partial<SessionRollback> = {}): SessionRollback => ({
  restored: {
    v: 1,
    name: "turn-3",
    tree: "a".repeat(40),
    at: "2026-11-27T03:00:00.000Z",
    kind: "turn",
    turn: 3,
    changedFiles: 2,
  },
  saved: {
    v: 1,
    name: "before-rollback-1",
    tree: "b".repeat(40),
    at: "2026-11-27T03:05:00.000Z",
    kind: "rollback",
    changedFiles: 2,
  },
  changed: new Map([
    ["src/app.py", "100644 " + "c".repeat(40)],
    ["x", "deleted"],
  ]),
  processesLeft: ["node server.js"],
  processesStopped: false,
  ...extra,
});

describe("the transcript's note after a rollback", () => {
  it("says which checkpoint, which files, what still runs and how to undo it", () => {
    const note = rollbackNote(outcome());
    expect(note).toMatch(/rolled \/workspace back to checkpoint turn-3 \(before turn 3\)/);
    expect(note).toMatch(/Files put back \(2\):\n- src\/app\.py\n- x \(removed\)/);
    expect(note).toMatch(/still running .*node server\.js/);
    expect(note).toMatch(/kept as checkpoint before-rollback-1/);
  });

  it("says the processes were stopped, and counts files past twenty", () => {
    const many = new Map(Array.from({ length: 25 }, (_, i) => [`f${i}`, "deleted"] as const));
    const note = rollbackNote(
      outcome({ changed: many, processesLeft: [], processesStopped: true }),
    );
    expect(note).toMatch(/- and 5 more/);
    expect(note).toMatch(/no process you started is running/);
  });
});

describe("why a listing's counts could not be taken", () => {
  it("is the error's message with its fix, when it has one", () => {
    expect(
      uncountedReason(
        new ImageError(
          "the sandbox image cordon-sandbox:0123456789ab is not on the Docker engine",
          {
            fix: "run `cordon image build`",
          },
        ),
      ),
    ).toBe(
      "the sandbox image cordon-sandbox:0123456789ab is not on the Docker engine (run `cordon image build`)",
    );
    expect(uncountedReason(new Error("socket hang up"))).toBe("socket hang up");
  });
});
