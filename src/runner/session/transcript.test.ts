import { describe, expect, it } from "vitest";

import type { SessionEntry } from "./session-line.js";
import { appendToRepaired, effectiveTranscript, repairToolResults } from "./transcript.js";

/** A deterministic stream of numbers in [0, 1). */
function generator(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

/** Message lines as a run and its interruptions leave them: calls, some results, some lost. */
function randomMessages(seed: number, count: number): SessionEntry[] {
  const next = generator(seed);
  const entries: SessionEntry[] = [];
  let open: string[] = [];
  let ids = 0;
  for (let i = 0; i < count; i++) {
    const ts = "2026-11-27T00:00:00.000Z";
    if (next() < 0.45) {
      const uses = Array.from({ length: Math.floor(next() * 3) }, () => `toolu_${++ids}`);
      open = uses;
      entries.push({
        v: 1,
        ts,
        kind: "message",
        role: "assistant",
        content: [
          { type: "text", text: `turn ${i}` },
          ...uses.map((id) => ({ type: "tool_use" as const, id, name: "exec", input: {} })),
        ],
      });
    } else {
      // Answers some of the open calls (an interrupted run answers fewer), maybe with text.
      const answered = open.filter(() => next() < 0.7);
      open = open.filter((id) => !answered.includes(id));
      entries.push({
        v: 1,
        ts,
        kind: "message",
        role: "user",
        content: [
          ...answered.map((id) => ({
            type: "tool_result" as const,
            toolUseId: id,
            content: [{ type: "text" as const, text: "ok" }],
            isError: false,
          })),
          ...(answered.length === 0 || next() < 0.3
            ? [{ type: "text" as const, text: "go on" }]
            : []),
        ],
      });
    }
  }
  return entries;
}

describe("appendToRepaired", () => {
  it("gives, line by line, what repairing the whole transcript gives", () => {
    for (let seed = 1; seed <= 200; seed++) {
      const entries = randomMessages(seed, 30);
      let items = repairToolResults([]).items;
      entries.forEach((entry, line) => {
        items = appendToRepaired(items, {
          line,
          message: { role: entry.role, content: entry.content } as never,
        });
        const whole = repairToolResults(effectiveTranscript(entries.slice(0, line + 1))).items;
        expect(items, `seed ${seed}, line ${line}`).toEqual(whole);
      });
    }
  });
});
