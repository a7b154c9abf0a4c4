import { defaultInspectionTimeoutMs, type Inspector } from "./workspace-inspector.js";

/**
 * One spare inspector kept started for a reader that reads a copy again and again (fix-tests'
 * diffs, a checkpoint per turn), so a reading pays its exec and the pause, not a container start.
 * A spare that has never run anything over the copy holds no agent data yet, and each reading
 * still gets a container no earlier one touched: every used inspector is removed.
 */
export interface SpareInspector {
  /**
   * Readings are coming: starts a spare now, and another after each `release` until `dispose`.
   * Unprepared, nothing is started ahead and `take` finds no spare. Resolves once the spare has
   * started (or failed to: then the next reading starts its own); never rejects.
   */
  prepare(): Promise<void>;
  /** The spare if it is fresh enough to use (a stale one is removed), else undefined. */
  take(): Promise<Inspector | undefined>;
  /** An inspector has done its one reading: removed off the caller's path; the next spare starts. */
  release(inspector: Inspector): void;
  /** Removes the spare, if one is waiting, and waits for every removal. */
  dispose(): Promise<void>;
}

/** `startOne` makes the kind of inspector the spare stands in for (its mounts and access). */
export function spareInspector(startOne: () => Promise<Inspector>): SpareInspector {
  let spare: { inspector: Promise<Inspector>; startedAt: number } | undefined;
  let prepared = false;
  let disposed = false;
  const removals = new Set<Promise<void>>();
  const removeLater = (inspector: Inspector | Promise<Inspector>): void => {
    const removal = Promise.resolve(inspector)
      .then((started) => started.remove())
      .catch(() => undefined)
      .finally(() => removals.delete(removal));
    removals.add(removal);
  };
  const startSpare = (): void => {
    if (!prepared || disposed || spare) return;
    const inspector = startOne();
    // A spare that failed to start is simply not used.
    inspector.catch(() => undefined);
    spare = { inspector, startedAt: Date.now() };
  };

  return {
    prepare: async () => {
      prepared = true;
      startSpare();
      await spare?.inspector.catch(() => undefined);
    },
    take: async () => {
      const taken = spare;
      spare = undefined;
      if (!taken) return undefined;
      // Its container ends by itself after one and a half deadlines (inspectorContainer): one
      // that has waited half of one still has a whole deadline left for the reading.
      if (Date.now() - taken.startedAt >= defaultInspectionTimeoutMs / 2) {
        removeLater(taken.inspector);
        return undefined;
      }
      return taken.inspector.catch(() => undefined);
    },
    release: (inspector) => {
      removeLater(inspector);
      startSpare();
    },
    dispose: async () => {
      disposed = true;
      if (spare) removeLater(spare.inspector);
      spare = undefined;
      await Promise.all([...removals]);
    },
  };
}
