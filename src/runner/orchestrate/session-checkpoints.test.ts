import { describe, expect, it } from "vitest";

import { rollbackNote, type SessionRollback } from "./session-checkpoints.js";

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
