/**
 * Serialises operations on one file of one sandbox, so two concurrent edits of the same file
 * cannot both read the old content and the second silently drop the first one's change.
 * Process-wide on purpose: two toolsets on one shared container must also wait for each other.
 */

const tails = new Map<string, Promise<void>>();

/** Runs `work` once every earlier `withPathLock` on the same key has settled. */
export async function withPathLock<T>(
  options: { sandboxId: string; path: string },
  work: () => Promise<T>,
): Promise<T> {
  const key = `${options.sandboxId}\u0000${options.path}`;
  const previous = tails.get(key) ?? Promise.resolve();
  let release!: () => void;
  const current = new Promise<void>((resolve) => {
    release = resolve;
  });
  const tail = previous.then(() => current);
  tails.set(key, tail);
  try {
    await previous;
    return await work();
  } finally {
    release();
    // The last holder cleans up, so the map does not grow with every path ever edited.
    if (tails.get(key) === tail) tails.delete(key);
  }
}

/** Keys currently held or awaited; for tests (a leak shows up here). */
export function pendingPathLocks(): number {
  return tails.size;
}

/** Holds the locks of several paths at once, taken in sorted order so two callers cannot deadlock. */
export async function withPathLocks<T>(
  options: { sandboxId: string; paths: readonly string[] },
  work: () => Promise<T>,
): Promise<T> {
  const sorted = [...new Set(options.paths)].sort();
  const take = async (index: number): Promise<T> => {
    const path = sorted[index];
    if (path === undefined) return work();
    return withPathLock({ sandboxId: options.sandboxId, path }, () => take(index + 1));
  };
  return take(0);
}
