import { AbortedError } from "./errors.js";

/** Throws `AbortedError` when the signal has fired. */
export function throwIfAborted(signal: AbortSignal | undefined, what = "operation"): void {
  if (signal?.aborted) throw new AbortedError(`${what} was aborted`, { cause: signal.reason });
}

/**
 * A signal that fires when any of the given ones does, or after `timeoutMs`.
 * Undefined inputs are ignored, so callers can pass optional signals straight through.
 */
export function combineSignals(
  signals: ReadonlyArray<AbortSignal | undefined>,
  timeoutMs?: number,
): AbortSignal {
  const all = signals.filter((s): s is AbortSignal => s !== undefined);
  if (timeoutMs !== undefined) all.push(AbortSignal.timeout(timeoutMs));
  if (all.length === 1 && all[0] !== undefined) return all[0];
  return AbortSignal.any(all);
}

/**
 * Runs `onAbort` once if `signal` fires while `work` is pending; the listener is removed when
 * `work` settles, so long-lived signals do not collect listeners.
 */
export async function withAbort<T>(
  signal: AbortSignal | undefined,
  work: Promise<T>,
  onAbort: () => void,
): Promise<T> {
  if (!signal) return work;
  if (signal.aborted) {
    onAbort();
    return work;
  }
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    return await work;
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

/** Resolves after `ms`, or rejects with `AbortedError` when the signal fires first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new AbortedError("sleep was aborted", { cause: signal.reason }));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new AbortedError("sleep was aborted", { cause: signal?.reason }));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
