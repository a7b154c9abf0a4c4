import { describe, expect, it } from "vitest";
import { AbortedError } from "../../common/index.js";
import { AsyncLimiter, SessionLanes } from "./lanes.js";

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => undefined;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe("SessionLanes", () => {
  it("serialises runs on one session", async () => {
    const lanes = new SessionLanes({ maxConcurrentRuns: 4 });
    const order: string[] = [];
    const gate = deferred();
    const first = lanes.run("s", async () => {
      order.push("first start");
      await gate.promise;
      order.push("first end");
    });
    const second = lanes.run("s", () => {
      order.push("second start");
      return Promise.resolve();
    });
    await tick();
    expect(order).toEqual(["first start"]);
    gate.resolve();
    await Promise.all([first, second]);
    expect(order).toEqual(["first start", "first end", "second start"]);
  });

  it("runs different sessions in parallel up to the global limit", async () => {
    const lanes = new SessionLanes({ maxConcurrentRuns: 2 });
    const gate = deferred();
    let running = 0;
    let peak = 0;
    const runs = ["a", "b", "c", "d"].map((key) =>
      lanes.run(key, async () => {
        running += 1;
        peak = Math.max(peak, running);
        await gate.promise;
        running -= 1;
      }),
    );
    await tick();
    expect(running).toBe(2);
    expect(lanes.activeRuns).toBe(2);
    gate.resolve();
    await Promise.all(runs);
    expect(peak).toBe(2);
    expect(lanes.activeRuns).toBe(0);
  });

  it("lets a queued run give up through its signal without blocking the next", async () => {
    const lanes = new SessionLanes({ maxConcurrentRuns: 1 });
    const gate = deferred();
    const first = lanes.run("s", () => gate.promise);
    const controller = new AbortController();
    const queued = lanes.run("s", () => Promise.resolve("never"), controller.signal);
    const third = lanes.run("s", () => Promise.resolve("third"));
    controller.abort();
    await expect(queued).rejects.toBeInstanceOf(AbortedError);
    gate.resolve();
    await first;
    expect(await third).toBe("third");
  });

  it("releases the lane when a run throws", async () => {
    const lanes = new SessionLanes();
    await expect(lanes.run("s", () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(await lanes.run("s", () => Promise.resolve(1))).toBe(1);
  });

  it("rejects a nonsensical limit", () => {
    expect(() => new AsyncLimiter(0)).toThrow(RangeError);
  });
});
