import { performance } from "node:perf_hooks";

import type { SandboxLease } from "../../src/sandbox/index.js";
import type { BenchContext } from "../context.js";
import { PeakMemory, compare, mebibytes, summarise, type MemoryPeak } from "../measure.js";
import type { FigureResult } from "../report.js";
import { FailureCount, execOk } from "./failures.js";

interface Phase {
  wallMs: number;
  memory: MemoryPeak;
}

/** Runs `each(worker)` for every worker at once; the wall time and this process's peak RSS. */
async function concurrently<T>(
  workers: readonly T[],
  each: (worker: T) => Promise<void>,
): Promise<Phase> {
  const memory = new PeakMemory();
  memory.start();
  const started = performance.now();
  await Promise.all(workers.map(each));
  const wallMs = performance.now() - started;
  return { wallMs, memory: memory.stop() };
}

/** Runs `fn` over `items` with at most `limit` at a time. */
async function limited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
  signal?: AbortSignal,
): Promise<void> {
  const queue = [...items];
  const worker = async (): Promise<void> => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) {
      signal?.throwIfAborted();
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/**
 * Figure 4: many sessions at once. All sessions are acquired concurrently through the manager
 * (timed, reported as a detail), then every session runs its execs one after another while all
 * sessions run at once: the wall time, failed execs, and the orchestrator's peak RSS. Baseline:
 * the same number of execs through the raw API, as many plain containers, same concurrency.
 * Rounds alternate cordon and baseline; the comparison is of their medians.
 */
export async function concurrency(ctx: BenchContext): Promise<FigureResult> {
  const sessions = ctx.quick ? 4 : 32;
  const execsPerSession = ctx.quick ? 3 : 10;
  const rounds = ctx.quick ? 1 : 3;
  const failures = new FailureCount();
  const baselineFailures = new FailureCount();
  const names = Array.from({ length: sessions }, (_, i) => `concurrent-${i}`);
  const specs = await Promise.all(names.map((name) => ctx.spec(name)));
  const leases: SandboxLease[] = [];
  const plain = names.map((name) => ctx.baselineName(name));

  try {
    ctx.progress(`concurrency: acquiring ${sessions} sessions at once`);
    const acquireStarted = performance.now();
    await Promise.all(
      specs.map((spec) =>
        failures.guard(async () => {
          leases.push(await ctx.manager.acquire(spec, { signal: ctx.signal }));
        }),
      ),
    );
    const acquireWallMs = performance.now() - acquireStarted;
    ctx.signal.throwIfAborted();
    ctx.progress(`concurrency: starting ${sessions} plain containers`);
    await limited(
      plain,
      4,
      async (name) => {
        await ctx.baselines.startContainer(name);
      },
      ctx.signal,
    );

    const cordonPhases: Phase[] = [];
    const baselinePhases: Phase[] = [];
    for (let round = 0; round < rounds; round += 1) {
      ctx.signal.throwIfAborted();
      ctx.progress(
        `concurrency: round ${round + 1}/${rounds}: ${sessions} × ${execsPerSession} execs each of cordon and raw API`,
      );
      const runCordon = async (): Promise<void> => {
        cordonPhases.push(
          await concurrently(leases, async (lease) => {
            for (let i = 0; i < execsPerSession; i += 1) {
              ctx.signal.throwIfAborted();
              await failures.guard(() => execOk(lease.sandbox, "true", ctx.signal));
            }
          }),
        );
      };
      const runBaseline = async (): Promise<void> => {
        baselinePhases.push(
          await concurrently(plain, async (name) => {
            for (let i = 0; i < execsPerSession; i += 1) {
              ctx.signal.throwIfAborted();
              await baselineFailures.guard(() => ctx.baselines.apiExec(name));
            }
          }),
        );
      };
      // Alternate who goes first, so neither always inherits the other's heap.
      for (const phase of round % 2 === 0 ? [runCordon, runBaseline] : [runBaseline, runCordon]) {
        await phase();
      }
    }

    const peak = (phases: Phase[]): number => Math.max(...phases.map((p) => p.memory.peakBytes));
    const growth = (phases: Phase[]): number =>
      Math.max(...phases.map((p) => p.memory.peakBytes - p.memory.startBytes));
    return {
      name: "concurrency",
      title: `${sessions} concurrent sessions × ${execsPerSession} execs`,
      comparisons: [
        {
          measures: `${sessions} sessions × ${execsPerSession} execs, wall`,
          ...compare(
            summarise(cordonPhases.map((p) => p.wallMs)),
            summarise(baselinePhases.map((p) => p.wallMs)),
            `${sessions * execsPerSession} raw API execs on ${sessions} plain containers`,
          ),
        },
      ],
      failures: failures.count,
      details: {
        sessions,
        execsPerSession,
        rounds,
        acquireWallMs: Math.round(acquireWallMs),
        cordonPeakRssMiB: mebibytes(peak(cordonPhases)),
        cordonRssGrowthMiB: mebibytes(growth(cordonPhases)),
        baselinePeakRssMiB: mebibytes(peak(baselinePhases)),
        baselineRssGrowthMiB: mebibytes(growth(baselinePhases)),
        // resourceUsage().maxRSS is in kilobytes; the peak of the whole bench process so far.
        processMaxRssMiB: mebibytes(process.resourceUsage().maxRSS * 1024),
        baselineFailures: baselineFailures.count,
        ...failures.details(),
      },
    };
  } finally {
    await Promise.all(leases.map((lease) => lease.release()));
    await limited([...specs.map((spec) => spec.containerName), ...plain], 4, (name) =>
      ctx.baselines.removeContainer(name),
    );
  }
}
