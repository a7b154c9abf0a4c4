import type { BenchContext } from "../context.js";
import { compare, timeInTurns } from "../measure.js";
import type { FigureResult } from "../report.js";
import { FailureCount, execOk } from "./failures.js";

/**
 * Figure 1: `true` in a running sandbox through `DockerSandbox.exec`, against `docker exec`
 * through the CLI and one raw Engine API exec, all three on the same container, in turns.
 */
export async function warmExec(ctx: BenchContext): Promise<FigureResult> {
  const runs = ctx.quick ? 8 : 60;
  const lease = await ctx.manager.acquire(await ctx.spec("warm-exec"), { signal: ctx.signal });
  const failures = new FailureCount();
  try {
    const container = lease.containerName;
    ctx.progress(`warm-exec: ${runs} runs each of cordon, docker exec (CLI), raw API exec`);
    const timings = await timeInTurns(
      {
        cordon: () => failures.guard(() => execOk(lease.sandbox, "true", ctx.signal)),
        cli: () => ctx.baselines.cliExec(container),
        api: () => ctx.baselines.apiExec(container),
      },
      runs,
      3,
    );
    return {
      name: "warm-exec",
      title: "warm exec round trip: `true` in a running sandbox",
      comparisons: [
        {
          measures: "exec true",
          ...compare(timings.cordon, timings.api, "one raw Docker API exec (dockerode)"),
        },
        { measures: "exec true", ...compare(timings.cordon, timings.cli, "`docker exec` (CLI)") },
      ],
      failures: failures.count,
      details: { runs, ...failures.details() },
    };
  } finally {
    await lease.release();
    await ctx.baselines.removeContainer(lease.containerName);
  }
}
