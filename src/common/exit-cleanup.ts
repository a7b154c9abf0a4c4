/**
 * Files a process must not leave behind however it ends short of SIGKILL: a session's lock and a
 * waiting run's file. A forced stop (a second Ctrl-C or SIGTERM) ends the process with
 * `process.exit`, which skips every `finally`; the `exit` event still runs, synchronously, so
 * each cleanup here is synchronous and must not throw.
 */
const cleanups = new Set<() => void>();

function runCleanups(): void {
  for (const cleanup of cleanups) {
    try {
      cleanup();
    } catch {
      // Best effort: the process is ending; the next run recognises a dead holder anyway.
    }
  }
  cleanups.clear();
}

/**
 * Runs `cleanup` (synchronous) when the process exits, unless the returned function is called
 * first (the work ended normally and cleaned up after itself).
 */
export function onProcessExit(cleanup: () => void): () => void {
  if (cleanups.size === 0 && process.listeners("exit").every((l) => l !== runCleanups)) {
    process.on("exit", runCleanups);
  }
  cleanups.add(cleanup);
  return () => {
    cleanups.delete(cleanup);
  };
}
