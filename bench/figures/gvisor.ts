import { randomBytes } from "node:crypto";

import type { Sandbox, SandboxSpec } from "../../src/sandbox/index.js";
import type { BenchContext } from "../context.js";
import { compare, timeInTurns, type Contender } from "../measure.js";
import type { FigureComparison, FigureResult } from "../report.js";
import { FailureCount, execOk } from "./failures.js";
import { newSessionAndExec } from "./new-session.js";

/** The runtime scripts/setup.sh registers for gVisor (CORDON_RUNTIME=runsc). */
const gvisorRuntime = "runsc";

/** A CPU-bound command: pure interpreter work, no system calls to speak of. */
const cpuBound = "python3 -c 'sum(i * i for i in range(300000))'";
/** A fork-heavy command: each /bin/true is a fork + exec, which gVisor's sentry pays for. */
const forkHeavy = "for i in $(seq 200); do /bin/true; done";

/**
 * Figure: what gVisor costs. The same work in a sandbox under runsc against one under the
 * engine's default runtime (runc), in turns in the same run: a new session's first result, a
 * warm `exec true`, a 1 KiB write + read, a CPU-bound python loop and 200 forks. Here the ratio
 * is runsc over runc — the price of gVisor's kernel as the boundary, not a budget (docs/gvisor.md
 * weighs it). Skipped, not failed, on an engine without runsc.
 */
export async function gvisor(ctx: BenchContext): Promise<FigureResult> {
  const info = await ctx.engine.ping();
  if (!info.runtimes.includes(gvisorRuntime)) {
    return {
      name: "gvisor",
      title: "gVisor (runsc) against runc",
      comparisons: [],
      failures: 0,
      details: {},
      skipped: `runsc is not registered with the engine (CORDON_RUNTIME=runsc bash scripts/setup.sh registers it)`,
    };
  }
  const failures = new FailureCount();
  const comparisons: FigureComparison[] = [
    await newSessions(ctx, failures),
    ...(await warmWork(ctx, failures)),
  ];
  return {
    name: "gvisor",
    title: "gVisor (runsc) against runc: the same work under each runtime",
    comparisons,
    failures: failures.count,
    details: { runtime: gvisorRuntime, ...failures.details() },
  };
}

const baselineName = "the same under runc (the engine's default runtime)";

async function newSessions(ctx: BenchContext, failures: FailureCount): Promise<FigureComparison> {
  const runs = ctx.quick ? 2 : 8;
  const warmup = 1;
  // Planning is config work done before a session starts; it is not what is timed.
  const specs = new Map<string, SandboxSpec>();
  const sessionOf = (runtime: string, run: number): string => `gvisor-${runtime}-${run + warmup}`;
  for (const runtime of [gvisorRuntime, "runc"]) {
    for (let run = -warmup; run < runs; run += 1) {
      const name = sessionOf(runtime, run);
      specs.set(name, await ctx.spec(name, runtime === "runc" ? {} : { runtime }));
    }
  }
  const contender =
    (runtime: string): Contender =>
    (run) =>
      failures.guard(() => {
        const spec = specs.get(sessionOf(runtime, run));
        if (!spec) throw new Error(`no spec for ${runtime} run ${run}`);
        return newSessionAndExec(ctx, spec);
      });
  ctx.progress(`gvisor: ${runs} new sessions each under runsc and runc`);
  const timings = await timeInTurns(
    { runsc: contender(gvisorRuntime), runc: contender("runc") },
    runs,
    warmup,
  );
  return {
    measures: "new session + exec true",
    ...compare(timings.runsc, timings.runc, baselineName),
  };
}

/** One warm sandbox under each runtime; the same operations timed in turns on both. */
async function warmWork(ctx: BenchContext, failures: FailureCount): Promise<FigureComparison[]> {
  const underRunsc = await ctx.manager.acquire(
    await ctx.spec("gvisor-warm-runsc", { runtime: gvisorRuntime }),
    { signal: ctx.signal },
  );
  try {
    const underRunc = await ctx.manager.acquire(await ctx.spec("gvisor-warm-runc"), {
      signal: ctx.signal,
    });
    try {
      const sandboxes = { runsc: underRunsc.sandbox, runc: underRunc.sandbox };
      const kib = new Uint8Array(randomBytes(1024));
      const operations: {
        measures: string;
        runs: number;
        op: (sandbox: Sandbox) => Promise<void>;
      }[] = [
        { measures: "exec true", runs: 30, op: (sandbox) => execOk(sandbox, "true", ctx.signal) },
        {
          measures: "1 KiB write + read",
          runs: 30,
          op: async (sandbox) => {
            const file = `${sandbox.workdir}/bench-gvisor.bin`;
            await sandbox.files.writeFile(file, kib, { signal: ctx.signal });
            const back = await sandbox.files.readFile(file, { signal: ctx.signal });
            if (!Buffer.from(back).equals(Buffer.from(kib)))
              throw new Error("read back other bytes");
          },
        },
        {
          measures: "CPU-bound python",
          runs: 8,
          op: (sandbox) => execOk(sandbox, cpuBound, ctx.signal),
        },
        {
          measures: "200 forks of /bin/true",
          runs: 8,
          op: (sandbox) => execOk(sandbox, forkHeavy, ctx.signal),
        },
      ];
      const comparisons: FigureComparison[] = [];
      for (const { measures, runs, op } of operations) {
        const count = ctx.quick ? Math.min(runs, 3) : runs;
        ctx.progress(`gvisor: ${measures}, ${count} runs each under runsc and runc`);
        const timings = await timeInTurns(
          {
            runsc: () => failures.guard(() => op(sandboxes.runsc)),
            runc: () => failures.guard(() => op(sandboxes.runc)),
          },
          count,
          1,
        );
        comparisons.push({ measures, ...compare(timings.runsc, timings.runc, baselineName) });
      }
      return comparisons;
    } finally {
      await underRunc.release();
      await ctx.inventory.remove(underRunc.containerName).catch(() => undefined);
    }
  } finally {
    await underRunsc.release();
    await ctx.inventory.remove(underRunsc.containerName).catch(() => undefined);
  }
}
