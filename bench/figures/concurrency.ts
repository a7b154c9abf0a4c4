import { mkdir } from "node:fs/promises";
import path from "node:path";
import { performance } from "node:perf_hooks";

import type { SandboxSpec } from "../../src/sandbox/index.js";
import type { BenchContext } from "../context.js";
import { PeakMemory, compare, mebibytes, summarise, type MemoryPeak } from "../measure.js";
import { withTarget, type FigureResult } from "../report.js";
import { FailureCount, execOk } from "./failures.js";

interface Phase {
  wallMs: number;
  memory: MemoryPeak;
  /** Per session: its execs, one after another, from the first start to the last end. */
  execsMs: number[];
  /** Per session: until its container was up (cordon: acquire; baseline: create + start). */
  upMs: number[];
}

/**
 * Runs `session(index, phase)` for every session at once: the wall time until the last one
 * ended, this process's peak RSS, and what each session recorded in `phase`.
 */
async function concurrently(
  count: number,
  session: (index: number, phase: Phase) => Promise<void>,
): Promise<Phase> {
  const memory = new PeakMemory();
  const phase: Phase = {
    wallMs: 0,
    memory: { startBytes: 0, peakBytes: 0 },
    execsMs: [],
    upMs: [],
  };
  memory.start();
  const started = performance.now();
  await Promise.all(Array.from({ length: count }, (_, index) => session(index, phase)));
  phase.wallMs = performance.now() - started;
  phase.memory = memory.stop();
  return phase;
}

/**
 * Figure 4: many sessions at once, each a whole session: a new sandbox, its execs one after
 * another, and its removal — all sessions started together (issue 17: 100 concurrent sessions
 * × 5 execs, 0 failures, wall ≤ 1.0 × the raw API's). cordon: `manager.acquire` (private
 * workspace, hardened container, its resident executor), `exec("true")`, `release` and
 * `sandbox rm` (`inventory.remove`: container, workspace, record). Baseline: the same through
 * the raw Engine API, as a program driving Docker by hand would: create and start a container
 * with the same hardening and a bind-mounted workspace, one API exec per call, remove it.
 * Rounds alternate cordon and baseline; the comparison is of their medians. The execs alone
 * (per session, under the full load) are a second comparison.
 */
export async function concurrency(ctx: BenchContext): Promise<FigureResult> {
  const sessions = ctx.quick ? 4 : 100;
  const execsPerSession = ctx.quick ? 3 : 5;
  const rounds = ctx.quick ? 1 : 2;
  const failures = new FailureCount();
  const baselineFailures = new FailureCount();
  const cordonPhases: Phase[] = [];
  const baselinePhases: Phase[] = [];

  for (let round = 0; round < rounds; round += 1) {
    ctx.signal.throwIfAborted();
    // Planned before the clock starts: planning is the runner's, not the session's.
    const specs: SandboxSpec[] = await Promise.all(
      Array.from({ length: sessions }, (_, i) => ctx.spec(`concurrent-${round}-${i}`)),
    );
    const baselineDocker = specs[0]?.docker;
    if (!baselineDocker) throw new Error("no sandbox spec to model the baseline on");
    const runCordon = async (): Promise<void> => {
      ctx.progress(
        `concurrency: round ${round + 1}/${rounds}: cordon, ${sessions} sessions × ${execsPerSession} execs`,
      );
      cordonPhases.push(
        await concurrently(sessions, async (index, phase) => {
          const spec = specs[index];
          if (!spec) return;
          await failures.guard(async () => {
            const started = performance.now();
            const lease = await ctx.manager.acquire(spec, { signal: ctx.signal });
            try {
              const up = performance.now();
              phase.upMs.push(up - started);
              for (let i = 0; i < execsPerSession; i += 1) {
                ctx.signal.throwIfAborted();
                await execOk(lease.sandbox, "true", ctx.signal);
              }
              phase.execsMs.push(performance.now() - up);
            } finally {
              await lease.release();
              await ctx.inventory.remove(spec.containerName);
            }
          });
        }),
      );
    };
    const runBaseline = async (): Promise<void> => {
      ctx.progress(
        `concurrency: round ${round + 1}/${rounds}: raw API, ${sessions} sessions × ${execsPerSession} execs`,
      );
      baselinePhases.push(
        await concurrently(sessions, async (index, phase) => {
          const name = ctx.baselineName(`concurrent-${round}-${index}`);
          await baselineFailures.guard(async () => {
            const started = performance.now();
            const workspace = path.join(ctx.baselineWorkspace, `concurrent-${round}-${index}`);
            await mkdir(workspace, { recursive: true });
            try {
              await ctx.baselines.apiStartHardened(name, baselineDocker, workspace);
              const up = performance.now();
              phase.upMs.push(up - started);
              for (let i = 0; i < execsPerSession; i += 1) {
                ctx.signal.throwIfAborted();
                await ctx.baselines.apiExec(name);
              }
              phase.execsMs.push(performance.now() - up);
            } finally {
              await ctx.baselines.apiRemove(name).catch(() => undefined);
            }
          });
        }),
      );
    };
    // Alternate who goes first, so neither always inherits the other's leftovers.
    for (const phase of round % 2 === 0 ? [runCordon, runBaseline] : [runBaseline, runCordon]) {
      await phase();
    }
  }

  const all = (phases: Phase[], pick: (phase: Phase) => number[]): number[] => phases.flatMap(pick);
  const peak = (phases: Phase[]): number => Math.max(...phases.map((p) => p.memory.peakBytes));
  const growth = (phases: Phase[]): number =>
    Math.max(...phases.map((p) => p.memory.peakBytes - p.memory.startBytes));
  const median = (samples: number[]): number => summarise(samples).medianMs;
  return {
    name: "concurrency",
    title: `${sessions} concurrent sessions × ${execsPerSession} execs`,
    comparisons: [
      withTarget(
        {
          measures: `${sessions} sessions × ${execsPerSession} execs (new, execs, removed), wall`,
          ...compare(
            summarise(cordonPhases.map((p) => p.wallMs)),
            summarise(baselinePhases.map((p) => p.wallMs)),
            `the same through the raw API (create, start, ${execsPerSession} execs, remove)`,
          ),
        },
        1.0,
      ),
      {
        measures: `one session's ${execsPerSession} execs, under that load`,
        ...compare(
          summarise(all(cordonPhases, (p) => p.execsMs)),
          summarise(all(baselinePhases, (p) => p.execsMs)),
          `${execsPerSession} raw API execs`,
        ),
      },
    ],
    failures: failures.count,
    details: {
      sessions,
      execsPerSession,
      rounds,
      cordonUpMedianMs: Math.round(median(all(cordonPhases, (p) => p.upMs))),
      baselineUpMedianMs: Math.round(median(all(baselinePhases, (p) => p.upMs))),
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
}
