import { describe, expect, it } from "vitest";

import { KeyedLock } from "./manager-lock.js";

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("KeyedLock", () => {
  it("runs work for one key one at a time, in arrival order", async () => {
    const lock = new KeyedLock();
    const log: string[] = [];
    const task = (name: string) =>
      lock.run("k", async () => {
        log.push(`${name} start`);
        await tick();
        log.push(`${name} end`);
        return name;
      });
    expect(await Promise.all([task("a"), task("b"), task("c")])).toEqual(["a", "b", "c"]);
    expect(log).toEqual(["a start", "a end", "b start", "b end", "c start", "c end"]);
  });

  it("lets different keys run at the same time", async () => {
    const lock = new KeyedLock();
    let release!: () => void;
    const blocked = lock.run("a", () => new Promise<void>((resolve) => (release = resolve)));
    let otherRan = false;
    await lock.run("b", () => {
      otherRan = true;
      return Promise.resolve();
    });
    expect(otherRan).toBe(true);
    release();
    await blocked;
  });

  it("passes the key on when work fails", async () => {
    const lock = new KeyedLock();
    const failed = lock.run("k", () => Promise.reject(new Error("boom")));
    const next = lock.run("k", () => Promise.resolve("next"));
    await expect(failed).rejects.toThrow("boom");
    expect(await next).toBe("next");
  });
});
