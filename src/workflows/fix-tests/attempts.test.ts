import { describe, expect, it } from "vitest";

import type { AttemptEnd } from "./attempt.js";
import {
  attemptReport,
  mergeAttempts,
  representativeAttempt,
  totalCost,
  type AttemptReport,
} from "./attempts.js";
import type { FixTestsResult, TestRun } from "./fix-tests.js";
import { renderSummary } from "./summary.js";

const run = (exitCode: number): TestRun => ({
  exitCode,
  timedOut: false,
  outputTail: "Ran 3 tests\n",
  counts: [{ runner: "unittest", ran: 3 }],
  countsNotRead: [],
  durationMs: 10,
});

/** The job's result after the run before the agent, as each attempt gets a copy of it. */
function base(): FixTestsResult {
  return {
    status: "error",
    exitCode: 1,
    message: "",
    testCommand: "python3 -m unittest",
    sessionKey: "agent:default:fix-tests-1",
    before: run(1),
    filesChanged: [],
    protectedFiles: [],
    binaryFiles: [],
    testCommandOutputs: [],
    testCommandRanTwice: false,
    restoredFiles: [],
    durationMs: 0,
    cost: { usd: 0 },
    durationsMs: { setup: 1000, outputs: 0, agent: 0, verify: 0, total: 0 },
    artifacts: [],
  };
}

function attempt(
  index: number,
  outcome: Pick<FixTestsResult, "status" | "exitCode" | "message">,
  usd: number | null,
): AttemptEnd {
  const result: FixTestsResult = {
    ...base(),
    ...outcome,
    sessionKey: `agent:default:fix-tests-1-a${index + 1}`,
    agent: {
      status: "completed",
      exitCode: 0,
      turns: index + 2,
      usage: {
        inputTokens: 100 * (index + 1),
        outputTokens: 10,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
      },
      durationMs: 500,
      cost: usd === null ? { usd: null, reason: 'cordon has no price for "scripted"' } : { usd },
      finalText: `attempt ${index + 1} done`,
    },
    filesChanged: [{ path: "pricing.py", change: "modified", binary: false }],
    durationsMs: { setup: 1000, outputs: 0, agent: 500 + index, verify: 200, total: 0 },
  };
  if (outcome.status === "fixed" || outcome.status === "verification_failed") {
    result.verification = run(outcome.status === "fixed" ? 0 : 1);
  }
  return { result, patch: new TextEncoder().encode(`patch ${index + 1}\n`) };
}

const fixed = { status: "fixed", exitCode: 0, message: "Fixed: the tests pass." } as const;
const failed = {
  status: "verification_failed",
  exitCode: 8,
  message: "The tests still fail on a clean copy with the patch.",
} as const;
const stoppedRun = {
  status: "agent_stopped",
  exitCode: 130,
  message: "The agent stopped before finishing: aborted",
} as const;

describe("attempt reports", () => {
  it("a bad, a stopped and a winning attempt: each one's outcome, turns, tokens and cost, and which won", () => {
    const ends = [attempt(0, failed, 0.01), attempt(1, stoppedRun, 0.02), attempt(2, fixed, 0.03)];
    const stopped = [false, true, false];
    const reports = ends.map((end, index) =>
      attemptReport(
        index,
        { outcome: end, stopped: stopped[index] === true },
        { won: index === 2, winner: 2 },
      ),
    );
    expect(reports.map((report) => [report.attempt, report.status, report.won])).toEqual([
      [1, "verification_failed", false],
      [2, "stopped", false],
      [3, "fixed", true],
    ]);
    expect(reports[1]).toMatchObject({
      message: "Stopped: attempt 3's fix was verified first.",
      turns: 3,
      usage: { inputTokens: 200, outputTokens: 10 },
      cost: { usd: 0.02 },
      artifacts: ["attempt-2.patch", "attempt-2.transcript.jsonl"],
    });
    expect(reports[0]?.verification).toEqual({ exitCode: 1, timedOut: false });

    const result = base();
    const chosen = mergeAttempts(result, ends, reports, 2);
    expect(chosen).toBe(2);
    // The winner's verdict, session and agent; every attempt's cost.
    expect(result).toMatchObject({
      status: "fixed",
      exitCode: 0,
      winner: 3,
      sessionKey: "agent:default:fix-tests-1-a3",
      agent: { turns: 4 },
      cost: { usd: 0.06 },
      durationsMs: { setup: 1000, agent: 502, verify: 200 },
    });
    expect(result.message).toBe(
      "Attempt 3 of 3 won. Fixed: the tests pass. (The others: attempt 1 verification failed; attempt 2 stopped.)",
    );
    expect(result.attempts).toHaveLength(3);

    const summary = renderSummary(result);
    expect(summary).toContain("## cordon fix-tests: ✅ Fixed and verified");
    expect(summary).toContain("| 1 | verification failed | 2 | 100 / 10 | ~$0.0100 | 1 |");
    expect(summary).toContain("| 2 | stopped | 3 | 200 / 10 | ~$0.0200 | 1 |");
    expect(summary).toContain("| 3 | 🏆 won: fixed and verified | 4 | 300 / 10 | ~$0.0300 | 1 |");
    expect(summary).toContain("Attempt 3 won;");
  });

  it("with no winner the furthest failure speaks for the job, with its exit code, and all are listed", () => {
    const noChanges = {
      status: "no_changes",
      exitCode: 8,
      message: "The agent made no changes.",
    } as const;
    const ends = [
      attempt(0, stoppedRun, 0.01),
      attempt(1, noChanges, 0.01),
      attempt(2, failed, 0.01),
    ];
    const reports = ends.map((end, index) =>
      attemptReport(index, { outcome: end, stopped: false }, { won: false, winner: undefined }),
    );
    expect(representativeAttempt(reports)).toBe(2);
    const result = base();
    expect(mergeAttempts(result, ends, reports, undefined)).toBe(2);
    expect(result).toMatchObject({ status: "verification_failed", exitCode: 8 });
    expect(result.winner).toBeUndefined();
    expect(result.message).toBe(
      "No attempt's fix was verified (attempt 1 agent stopped; attempt 2 no changes; attempt 3 verification failed). Attempt 3: The tests still fail on a clean copy with the patch.",
    );
    expect(renderSummary(result)).toContain("None won;");
  });

  it("among equal failures the lowest attempt speaks; a stopped attempt's own exit is kept without a winner", () => {
    const reports = [stoppedRun, stoppedRun].map((outcome, index): AttemptReport =>
      attemptReport(
        index,
        { outcome: attempt(index, outcome, 0), stopped: true },
        {
          won: false,
          winner: undefined,
        },
      ),
    );
    expect(reports.map((report) => report.status)).toEqual(["agent_stopped", "agent_stopped"]);
    expect(representativeAttempt(reports)).toBe(0);
  });

  it("the total cost is unknown when any attempt's is, with that attempt's reason", () => {
    expect(totalCost([{ usd: 0.1 }, { usd: 0.2 }])).toEqual({ usd: 0.3 });
    expect(totalCost([{ usd: 0.1 }, { usd: null, reason: "no price" }])).toEqual({
      usd: null,
      reason: "no price",
    });
  });
});
