import type { BenchContext } from "../context.js";
import { compare, timeInTurns } from "../measure.js";
import { withTarget, type FigureResult } from "../report.js";
import { FailureCount } from "./failures.js";
import { newSessionAndExec } from "./new-session.js";

/**
 * Figure 2: the first result of a new session — `DockerSandboxManager.acquire` (image check,
 * private workspace, create, start) and the first `exec true` — against `docker run -d` with the
 * same hardening (as far as the CLI spells it) and one `docker exec true`. Every run is a new
 * session; its container is removed after the clock stopped.
 */
export async function firstResult(ctx: BenchContext): Promise<FigureResult> {
  const runs = ctx.quick ? 2 : 10;
  const warmup = 1;
  const failures = new FailureCount();
  const sessionOf = (run: number): string => `first-${run + warmup}`;
  // Planning is config work done before a session starts; it is not what is timed.
  const specs = new Map<string, Awaited<ReturnType<BenchContext["spec"]>>>();
  for (let run = -warmup; run < runs; run += 1) {
    specs.set(sessionOf(run), await ctx.spec(sessionOf(run)));
  }
  const template = await ctx.spec("first-template");

  const cordon = (run: number): Promise<() => Promise<void>> => {
    const spec = specs.get(sessionOf(run));
    if (!spec) throw new Error(`no spec for run ${run}`);
    return newSessionAndExec(ctx, spec);
  };
  const plain = async (run: number): Promise<() => Promise<void>> => {
    const name = ctx.baselineName(sessionOf(run));
    const cleanup = (): Promise<void> => ctx.baselines.removeContainer(name);
    try {
      await ctx.baselines.runHardened(name, template.docker, ctx.baselineWorkspace);
      await ctx.baselines.cliExec(name);
    } catch (error) {
      await cleanup();
      throw error;
    }
    return cleanup;
  };

  ctx.progress(`first-result: ${runs} new sessions each of cordon and docker run + docker exec`);
  const timings = await timeInTurns(
    { cordon: (run) => failures.guard(() => cordon(run)), plain },
    runs,
    warmup,
  );
  return {
    name: "first-result",
    title: "first result of a new session: create + start + first exec",
    comparisons: [
      withTarget(
        {
          measures: "new session + exec true",
          ...compare(timings.cordon, timings.plain, "`docker run -d` (hardened) + `docker exec`"),
        },
        1.0,
      ),
    ],
    failures: failures.count,
    details: { runs, ...failures.details() },
  };
}
