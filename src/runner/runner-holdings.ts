import { SandboxError, messageOf } from "../common/index.js";
import type { RunPlan } from "../policy/index.js";
import {
  disposeSandbox,
  type SandboxDisposal,
  type SandboxDisposalMode,
  type SandboxProvider,
} from "./orchestrate/index.js";

/**
 * What a runner holds until `close()`: its runs and calls in flight, and every sandbox they
 * acquired. `close()` waits for the work, then does `onClose` to each sandbox; after it, nothing
 * more is acquired.
 */
export interface RunnerHoldings {
  /** `provider`, remembering each sandbox acquired through it and refusing after `close()`. */
  readonly sandboxes: SandboxProvider;
  /** Counts `work` as in flight (`close()` waits for it) until it settles. */
  readonly track: <T>(work: Promise<T>) => Promise<T>;
  /** One entry for each sandbox used; calling it again returns the same answer. */
  readonly close: () => Promise<SandboxDisposal[]>;
}

export function holdSandboxes(options: {
  provider: SandboxProvider;
  stateDir: string;
  onClose: SandboxDisposalMode;
}): RunnerHoldings {
  const { provider, stateDir, onClose } = options;
  // By container name: two runs of one session use one sandbox, and it is disposed of once.
  const used = new Map<string, RunPlan>();
  const inFlight = new Set<Promise<unknown>>();
  let closing: Promise<SandboxDisposal[]> | undefined;

  /** Refused after `close()`; otherwise `plan`'s sandbox is one to dispose of then. */
  const use = (plan: RunPlan): void => {
    if (closing) {
      throw new SandboxError("this runner is closed: it acquires no more sandboxes", {
        fix: "create another runner with createRunner()",
      });
    }
    const name = plan.sandbox.enabled ? plan.sandbox.spec?.containerName : undefined;
    if (name) used.set(name, plan);
  };
  const fork = provider.fork?.bind(provider);
  const sandboxes: SandboxProvider = {
    // Bound, not spread: an embedder's provider may be a class whose methods are on its prototype.
    ...(provider.discard && { discard: provider.discard.bind(provider) }),
    ...(provider.stop && { stop: provider.stop.bind(provider) }),
    // Acquires nothing (it reads the checkpoint store alone), so nothing for close() to hold.
    ...(provider.compareCheckpoints && {
      compareCheckpoints: provider.compareCheckpoints.bind(provider),
    }),
    ...(fork && {
      fork: async (source, target, forkOptions) => {
        use(target);
        return fork(source, target, forkOptions);
      },
    }),
    async acquire(plan, acquireOptions) {
      use(plan);
      return provider.acquire(plan, acquireOptions);
    },
  };

  const disposeUsed = async (): Promise<SandboxDisposal[]> => {
    // Runs end first: a sandbox is never stopped under a command of this runner.
    while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    const done: SandboxDisposal[] = [];
    for (const [sandbox, plan] of used) {
      const disposal = await disposeSandbox({ sandboxes: provider, plan, mode: onClose, stateDir })
        // One sandbox that cannot be stopped does not keep the others running.
        .catch((error: unknown): SandboxDisposal => ({
          sandbox,
          outcome: "kept",
          reason: `cannot ${onClose} it: ${messageOf(error)}`,
        }));
      if (disposal) done.push(disposal);
    }
    return done;
  };

  return {
    sandboxes,
    track: (work) => {
      inFlight.add(work);
      const settled = (): void => void inFlight.delete(work);
      void work.then(settled, settled);
      return work;
    },
    // Then the backend's own background work (a pool refill these acquires started).
    close: () =>
      (closing ??= disposeUsed().then(async (done) => {
        await provider.settle?.();
        return done;
      })),
  };
}
