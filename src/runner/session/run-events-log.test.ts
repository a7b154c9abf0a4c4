import { appendFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { summarizeRun } from "./active-runs.js";
import { RunEventsLog, readRunEvents } from "./run-events-log.js";

describe("a session's events file", () => {
  let dir: string;
  let file: string;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "cordon-run-events-"));
    file = path.join(dir, "s.events.jsonl");
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("keeps the events from before the lock, then appends in order with stream-json's seq, without deltas", async () => {
    const log = new RunEventsLog("run-1");
    log.record({ type: "run-start" });
    log.record({ type: "plan" });
    expect((await readRunEvents(file)).records).toEqual([]);
    log.attach(file);
    log.record({ type: "text-delta", text: "hel" } as { type: string });
    log.record({ type: "assistant-message" });
    await log.flushed();
    const { records } = await readRunEvents(file);
    expect(records.map((r) => [r.seq, r.type, r.runId])).toEqual([
      [1, "run-start", "run-1"],
      [2, "plan", "run-1"],
      [4, "assistant-message", "run-1"],
    ]);
  });

  it("holds the file open only until flushed: one replaced meanwhile gets the later events, none lost", async () => {
    const log = new RunEventsLog("run-1");
    log.attach(file);
    log.record({ type: "run-start" });
    await log.flushed();
    // Removed between two runs of a session (by hand, or the session removed): the next run writes anew.
    await rm(file);
    log.record({ type: "run-end" });
    await log.flushed();
    expect((await readRunEvents(file)).records.map((r) => [r.seq, r.type])).toEqual([
      [2, "run-end"],
    ]);
  });

  it("a file it cannot write loses the log, not the run", async () => {
    const log = new RunEventsLog("run-1");
    log.attach(path.join(dir, "missing", "s.events.jsonl"));
    log.record({ type: "run-start" });
    await expect(log.flushed()).resolves.toBeUndefined();
    log.record({ type: "run-end" });
    await expect(log.flushed()).resolves.toBeUndefined();
  });

  it("a line still being written is read only once it is complete", async () => {
    await appendFile(file, '{"v":1,"seq":1,"ts":"t","runId":"r","type":"run-start"}\n{"v":1,"se');
    const first = await readRunEvents(file);
    expect(first.records.map((r) => r.type)).toEqual(["run-start"]);
    await appendFile(file, 'q":2,"ts":"t","runId":"r","type":"model-start","turn":1}\n');
    const second = await readRunEvents(file, first.next);
    expect(second.records.map((r) => r.type)).toEqual(["model-start"]);
  });

  it("reading the tail starts at a whole line", async () => {
    const line = (seq: number) =>
      `${JSON.stringify({ v: 1, seq, ts: "t", runId: "r", type: "tool-call", name: "exec" })}\n`;
    await appendFile(file, line(1) + line(2) + line(3));
    const { records } = await readRunEvents(file, -(line(3).length + 5));
    expect(records.map((r) => r.seq)).toEqual([3]);
  });

  it("says what a run is doing from its events", () => {
    const record = (type: string, extra: Record<string, unknown> = {}) => ({
      v: 1 as const,
      seq: 0,
      ts: "2026-01-01T00:00:00Z",
      runId: "r",
      type,
      ...extra,
    });
    expect(
      summarizeRun([
        record("run-start"),
        record("sandbox-ready", { container: "cordon-x" }),
        record("model-start", { turn: 1 }),
        record("tool-call", { name: "exec", input: { command: "npm test" } }),
      ]),
    ).toMatchObject({ sandbox: "cordon-x", turns: 1, doing: "running exec npm test" });
    // A running command's last output line, until its result.
    const running = [
      record("tool-call", { name: "exec", input: { command: "pytest" } }),
      record("tool-output", { name: "exec", text: "a\n", lastLine: "tests/a.py ...." }),
      record("tool-output", { name: "exec", text: "\n", lastLine: "tests/b.py .." }),
    ];
    expect(summarizeRun(running)).toMatchObject({
      doing: "running exec pytest",
      output: "tests/b.py ..",
    });
    expect(
      summarizeRun([...running, record("tool-result", { name: "exec" })]).output,
    ).toBeUndefined();
    expect(summarizeRun([record("run-end", { status: "completed" })])).toMatchObject({
      status: "completed",
      doing: "ended: completed",
    });
  });
});
