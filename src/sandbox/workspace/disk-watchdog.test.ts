import { describe, expect, it } from "vitest";

import { DiskBudgetExceededError, DiskWatchdog } from "./disk-watchdog.js";

describe("DiskWatchdog with a volume known to be small", () => {
  const watchdogOf = async (atMost: number, used: number) => {
    const measured: number[] = [];
    const watchdog = await DiskWatchdog.for({
      workspace: undefined,
      diskBytes: 1000,
      volume: {
        name: "cordon-x-workspace",
        atMost,
        bytes: () => {
          measured.push(used);
          return Promise.resolve(used);
        },
      },
      containerName: "cordon-x",
    });
    if (!watchdog) throw new Error("no watchdog for a volume with a budget");
    return { watchdog, measured };
  };

  it("answers the first check from the bound within budget, and measures every later one", async () => {
    const { watchdog, measured } = await watchdogOf(900, 1200);
    await watchdog.assertWithinBudget();
    expect(measured).toEqual([]);
    // The sandbox may have written since: the bound no longer holds.
    await expect(watchdog.assertWithinBudget()).rejects.toBeInstanceOf(DiskBudgetExceededError);
    expect(measured).toEqual([1200]);
  });

  it("measures when the bound is over the budget, and refuses only what is really over", async () => {
    const { watchdog, measured } = await watchdogOf(5000, 700);
    await watchdog.assertWithinBudget();
    expect(measured).toEqual([700]);
    const over = await watchdogOf(5000, 1001);
    await expect(over.watchdog.assertWithinBudget()).rejects.toThrow(/more than sandbox.disk/);
  });
});
