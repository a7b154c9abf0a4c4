import { describe, expect, it } from "vitest";

import { OutpacedError, raceAttempts } from "./race.js";

/** Resolves when the signal aborts, with its reason. */
function untilAborted(signal: AbortSignal): Promise<string> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(`stopped: ${String(signal.reason)}`);
    signal.addEventListener("abort", () => resolve(`stopped: ${String(signal.reason)}`), {
      once: true,
    });
  });
}

describe("raceAttempts", () => {
  it("the first winning outcome stops the attempts still running; the ones that ended keep their outcome", async () => {
    let releaseGood!: () => void;
    const goodMayFinish = new Promise<void>((resolve) => (releaseGood = resolve));
    const settledOrder: number[] = [];
    const reasons: unknown[] = [];
    const result = await raceAttempts<string>({
      count: 3,
      run: async (index, signal) => {
        if (index === 0) {
          // The bad attempt ends (not a win) before the good one may finish.
          releaseGood();
          return "verification_failed";
        }
        if (index === 1) {
          const outcome = await untilAborted(signal);
          reasons.push(signal.reason);
          return outcome;
        }
        await goodMayFinish;
        return "fixed";
      },
      won: (outcome) => outcome === "fixed",
      failed: () => "error",
      onSettled: (index) => settledOrder.push(index),
    });
    expect(result.winner).toBe(2);
    expect(result.entries.map((entry) => entry.outcome)).toEqual([
      "verification_failed",
      "stopped: OutpacedError: attempt 3's fix was verified first",
      "fixed",
    ]);
    expect(result.entries.map((entry) => entry.stopped)).toEqual([false, true, false]);
    expect(reasons[0]).toBeInstanceOf(OutpacedError);
    // It returns only once the stopped attempt has settled too.
    expect(settledOrder).toEqual([0, 2, 1]);
  });

  it("only the first win counts: a second fix already finishing is stopped, not a winner", async () => {
    const result = await raceAttempts<string>({
      count: 2,
      run: async (index, signal) => {
        if (index === 0) return "fixed";
        await untilAborted(signal);
        // Finished its verification just as it was stopped: still not a second winner.
        return "fixed";
      },
      won: (outcome) => outcome === "fixed",
      failed: () => "error",
    });
    expect(result.winner).toBe(0);
    expect(result.entries[1]).toEqual({ outcome: "fixed", stopped: true });
  });

  it("an attempt that throws becomes its failed outcome and ends no other attempt", async () => {
    const result = await raceAttempts<string>({
      count: 3,
      run: (index) => {
        if (index === 1) return Promise.reject(new Error("docker went away"));
        return Promise.resolve(index === 2 ? "fixed" : "no_changes");
      },
      won: (outcome) => outcome === "fixed",
      failed: (index, error) => `error ${index}: ${(error as Error).message}`,
      onSettled: () => {
        throw new Error("a listener that throws");
      },
    });
    expect(result.winner).toBe(2);
    expect(result.entries.map((entry) => entry.outcome)).toEqual([
      "no_changes",
      "error 1: docker went away",
      "fixed",
    ]);
  });

  it("no winner: every attempt runs to its own end and none is marked stopped", async () => {
    const result = await raceAttempts<string>({
      count: 2,
      run: (index) => Promise.resolve(`failed ${index}`),
      won: () => false,
      failed: () => "error",
    });
    expect(result.winner).toBeUndefined();
    expect(result.entries).toEqual([
      { outcome: "failed 0", stopped: false },
      { outcome: "failed 1", stopped: false },
    ]);
  });

  it("the caller's signal stops every attempt, and no attempt is taken for a winner", async () => {
    const caller = new AbortController();
    const started: number[] = [];
    const race = raceAttempts<string>({
      count: 2,
      run: async (index, signal) => {
        started.push(index);
        if (started.length === 2) caller.abort(new Error("Ctrl-C"));
        return untilAborted(signal);
      },
      won: () => true,
      failed: () => "error",
      signal: caller.signal,
    });
    const result = await race;
    expect(result.entries.map((entry) => entry.outcome)).toEqual([
      "stopped: Error: Ctrl-C",
      "stopped: Error: Ctrl-C",
    ]);
    // Stopped by the caller, not outpaced: `stopped` says another attempt won, and none did.
    expect(result.entries.map((entry) => entry.stopped)).toEqual([false, false]);
    expect(result.winner).toBeUndefined();
  });
});
