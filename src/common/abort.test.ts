import { getEventListeners } from "node:events";

import { describe, expect, it } from "vitest";

import { combineSignals, sleep, throwIfAborted, withAbort } from "./abort.js";
import { AbortedError } from "./errors.js";

function listenerCount(signal: AbortSignal): number {
  return getEventListeners(signal, "abort").length;
}

describe("abort helpers", () => {
  it("throwIfAborted throws AbortedError only once aborted", () => {
    const controller = new AbortController();
    expect(() => throwIfAborted(controller.signal)).not.toThrow();
    controller.abort();
    expect(() => throwIfAborted(controller.signal, "build")).toThrow(AbortedError);
    expect(() => throwIfAborted(undefined)).not.toThrow();
  });

  it("combineSignals fires when any input fires and ignores undefined ones", () => {
    const a = new AbortController();
    const b = new AbortController();
    const combined = combineSignals([a.signal, undefined, b.signal]);
    expect(combined.aborted).toBe(false);
    b.abort("why");
    expect(combined.aborted).toBe(true);
  });

  it("combineSignals with a timeout fires on its own", async () => {
    const combined = combineSignals([new AbortController().signal], 5);
    await new Promise((resolve) => combined.addEventListener("abort", resolve, { once: true }));
    expect(combined.aborted).toBe(true);
  });

  it("sleep rejects with AbortedError when aborted and leaves no listener behind", async () => {
    const controller = new AbortController();
    const pending = sleep(10_000, controller.signal);
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(AbortedError);

    const long = new AbortController();
    const sleeping = sleep(1, long.signal);
    expect(listenerCount(long.signal)).toBe(1);
    await sleeping;
    expect(listenerCount(long.signal)).toBe(0);
  });

  it("withAbort calls onAbort while pending and removes its listener afterwards", async () => {
    const controller = new AbortController();
    let aborted = 0;
    let release: () => void = () => undefined;
    const work = new Promise<string>((resolve) => {
      release = () => resolve("done");
    });
    const wrapped = withAbort(controller.signal, work, () => {
      aborted += 1;
      release();
    });
    controller.abort();
    await expect(wrapped).resolves.toBe("done");
    expect(aborted).toBe(1);

    const idle = new AbortController();
    await withAbort(idle.signal, Promise.resolve(1), () => undefined);
    expect(listenerCount(idle.signal)).toBe(0);
  });
});
