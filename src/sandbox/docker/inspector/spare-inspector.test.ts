import { afterEach, describe, expect, it, vi } from "vitest";
import { spareInspector } from "./spare-inspector.js";
import { defaultInspectionTimeoutMs, type Inspector } from "./workspace-inspector.js";

/** Inspectors numbered in the order they were started, each knowing whether it was removed. */
function inspectorFactory() {
  const started: { id: number; removed: boolean }[] = [];
  const startOne = (): Promise<Inspector & { id: number }> => {
    const record = { id: started.length + 1, removed: false };
    started.push(record);
    return Promise.resolve({
      id: record.id,
      run: () => Promise.resolve(Buffer.alloc(0)),
      remove: () => {
        record.removed = true;
        return Promise.resolve();
      },
    });
  };
  return { started, startOne };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("spareInspector", () => {
  it("starts nothing and offers no spare until prepared", async () => {
    const { started, startOne } = inspectorFactory();
    const spares = spareInspector(startOne);
    expect(await spares.take()).toBeUndefined();
    expect(started).toHaveLength(0);
  });

  it("hands out the spare once, removes it after use and starts the next", async () => {
    const { started, startOne } = inspectorFactory();
    const spares = spareInspector(startOne);
    await spares.prepare();
    const first = await spares.take();
    expect(first).toMatchObject({ id: 1 });
    expect(await spares.take()).toBeUndefined();
    spares.release(first!);
    await spares.dispose();
    expect(started).toEqual([
      { id: 1, removed: true },
      { id: 2, removed: true },
    ]);
  });

  it("keeps a waiting spare when an inspector of another kind is released", async () => {
    const { started, startOne } = inspectorFactory();
    const spares = spareInspector(startOne);
    await spares.prepare();
    const other = await startOne();
    spares.release(other);
    expect(started).toHaveLength(2);
    expect(await spares.take()).toMatchObject({ id: 1 });
  });

  it("removes a spare that waited half a deadline instead of handing it out", async () => {
    vi.useFakeTimers();
    const { started, startOne } = inspectorFactory();
    const spares = spareInspector(startOne);
    await spares.prepare();
    vi.advanceTimersByTime(defaultInspectionTimeoutMs / 2);
    expect(await spares.take()).toBeUndefined();
    await spares.dispose();
    expect(started).toEqual([{ id: 1, removed: true }]);
  });

  it("treats a spare that failed to start as none", async () => {
    const spares = spareInspector(() => Promise.reject(new Error("engine gone")));
    // Waiting for a spare that cannot start is not an error: the next reading starts its own.
    await expect(spares.prepare()).resolves.toBeUndefined();
    expect(await spares.take()).toBeUndefined();
  });

  it("starts no spare after dispose", async () => {
    const { started, startOne } = inspectorFactory();
    const spares = spareInspector(startOne);
    await spares.prepare();
    const first = await spares.take();
    await spares.dispose();
    spares.release(first!);
    expect(started).toHaveLength(1);
  });
});
