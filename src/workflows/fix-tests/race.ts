/** How one attempt of a race ended. */
export interface RaceEntry<T> {
  outcome: T;
  /** It was still running when another attempt won, so it was stopped (its signal aborted). */
  stopped: boolean;
}

export interface RaceOptions<T> {
  /** How many attempts start, all at once (what bounds their work is the caller's: the lanes). */
  count: number;
  /**
   * Runs attempt `index` (0-based). `signal` aborts when another attempt has won or the caller's
   * signal does. A throw counts as `failed(index, error)`: one attempt's crash ends no other.
   */
  run: (index: number, signal: AbortSignal) => Promise<T>;
  /** Whether an outcome wins the race (a verified fix). */
  won: (outcome: T) => boolean;
  /** The outcome of an attempt whose `run` threw. */
  failed: (index: number, error: unknown) => T;
  /** Told once, at the moment an attempt wins (before the others have settled). */
  onWin?: ((index: number) => void) | undefined;
  /** Told as each attempt settles, in the order they do. */
  onSettled?: ((index: number, entry: RaceEntry<T>) => void) | undefined;
  signal?: AbortSignal | undefined;
}

export interface RaceResult<T> {
  /** Every attempt's end, by index; all have settled when the race returns. */
  entries: RaceEntry<T>[];
  /** The first attempt that won, if any. */
  winner: number | undefined;
}

/** Why a losing attempt's signal aborts: not the user's interrupt, so it is told apart. */
export class OutpacedError extends Error {
  constructor(readonly winner: number) {
    super(`attempt ${winner + 1}'s fix was verified first`);
    this.name = "OutpacedError";
  }
}

/**
 * N attempts at once; the first whose outcome wins aborts the rest (their signals carry an
 * `OutpacedError`), and the race returns once every attempt has settled, so nothing it started
 * is still running when the caller cleans up.
 */
export async function raceAttempts<T>(options: RaceOptions<T>): Promise<RaceResult<T>> {
  const controllers = Array.from({ length: options.count }, () => new AbortController());
  let winner: number | undefined;
  const settled = controllers.map(async (controller, index): Promise<RaceEntry<T>> => {
    const signal = options.signal
      ? AbortSignal.any([options.signal, controller.signal])
      : controller.signal;
    let outcome: T;
    try {
      outcome = await options.run(index, signal);
    } catch (error) {
      outcome = options.failed(index, error);
    }
    const stopped = controller.signal.aborted;
    // Stopped by the caller, nothing wins: a fix that finished as the user pressed Ctrl-C included.
    const live = !stopped && options.signal?.aborted !== true;
    if (live && winner === undefined && options.won(outcome)) {
      winner = index;
      options.onWin?.(index);
      for (const [other, each] of controllers.entries()) {
        if (other !== index) each.abort(new OutpacedError(index));
      }
    }
    const entry = { outcome, stopped };
    // A listener's throw (an embedder's event sink) must not leave the other attempts unawaited.
    try {
      options.onSettled?.(index, entry);
    } catch {
      // reported nowhere: the entry is in the result all the same
    }
    return entry;
  });
  return { entries: await Promise.all(settled), winner };
}
