import { AbortedError } from "../../common/index.js";

/** Releases a slot; calling it twice is harmless. */
export type Release = () => void;

interface Waiter {
  grant: () => void;
  reject: (error: unknown) => void;
}

/** A counting semaphore whose waiters can give up through an AbortSignal; FIFO. */
export class AsyncLimiter {
  #active = 0;
  readonly #waiters: Waiter[] = [];

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(`a concurrency limit must be a positive integer, got ${limit}`);
    }
  }

  get active(): number {
    return this.#active;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  acquire(signal?: AbortSignal): Promise<Release> {
    if (signal?.aborted) {
      return Promise.reject(new AbortedError("waiting for a run slot was aborted"));
    }
    if (this.#active < this.limit) {
      this.#active += 1;
      return Promise.resolve(this.#releaser());
    }
    return new Promise<Release>((resolve, reject) => {
      const onAbort = (): void => {
        const index = this.#waiters.indexOf(waiter);
        if (index >= 0) this.#waiters.splice(index, 1);
        reject(new AbortedError("waiting for a run slot was aborted"));
      };
      const waiter: Waiter = {
        grant: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve(this.#releaser());
        },
        reject,
      };
      this.#waiters.push(waiter);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  #releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiters.shift();
      // The slot passes straight to the next waiter, so `active` stays the same.
      if (next) next.grant();
      else this.#active -= 1;
    };
  }
}

export interface SessionLanesOptions {
  /** Runs that may be in flight at once, over all sessions. Default 4. */
  maxConcurrentRuns?: number | undefined;
}

/**
 * Lanes: runs on one session key are serialised (a session file has one writer), and a global
 * limit bounds concurrent runs. A run waits for its session's lane first, so a queued run does not
 * hold a global slot while its own session is busy.
 */
export class SessionLanes {
  readonly #global: AsyncLimiter;
  readonly #lanes = new Map<string, { limiter: AsyncLimiter; users: number }>();

  constructor(options: SessionLanesOptions = {}) {
    this.#global = new AsyncLimiter(options.maxConcurrentRuns ?? 4);
  }

  /** Runs currently holding a global slot. */
  get activeRuns(): number {
    return this.#global.active;
  }

  async run<T>(sessionKey: string, task: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    let lane = this.#lanes.get(sessionKey);
    if (!lane) {
      lane = { limiter: new AsyncLimiter(1), users: 0 };
      this.#lanes.set(sessionKey, lane);
    }
    lane.users += 1;
    try {
      const releaseLane = await lane.limiter.acquire(signal);
      try {
        const releaseGlobal = await this.#global.acquire(signal);
        try {
          return await task();
        } finally {
          releaseGlobal();
        }
      } finally {
        releaseLane();
      }
    } finally {
      lane.users -= 1;
      if (lane.users === 0) this.#lanes.delete(sessionKey);
    }
  }
}
