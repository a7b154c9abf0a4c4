import { DockerSandbox } from "../../src/sandbox/index.js";
import { scriptInvocation } from "../../src/sandbox/shell/command-line.js";
import { shellScript } from "../../src/sandbox/shell/shell-scripts.js";
import type { BenchContext } from "../context.js";
import { compare, timeInTurns } from "../measure.js";
import { withTarget, type FigureResult } from "../report.js";
import { FailureCount, execOk } from "./failures.js";

/**
 * Figure 1: `true` in a running sandbox through `DockerSandbox.exec`, against `docker exec`
 * through the CLI and one raw Engine API exec, all on the same container, in turns. A raw exec
 * of `bash -lc true` is set beside them too: cordon runs commands in a login shell, and that
 * part of its cost is the shell's, not the transport's.
 */
const rawExec = "one raw Docker API exec (dockerode)";

export async function warmExec(ctx: BenchContext): Promise<FigureResult> {
  const runs = ctx.quick ? 8 : 60;
  const spec = await ctx.spec("warm-exec");
  const lease = await ctx.manager.acquire(spec, { signal: ctx.signal });
  const failures = new FailureCount();
  try {
    const container = lease.containerName;
    // The same container reached by one Docker exec per call: what the resident executor saves.
    const plain = new DockerSandbox({
      engine: ctx.engine,
      containerId: container,
      containerName: container,
      workdir: lease.sandbox.workdir,
      user: spec.docker.user,
      executor: "exec",
    });
    ctx.progress(`warm-exec: ${runs} runs each of cordon, docker exec (CLI), raw API exec`);
    const timings = await timeInTurns(
      {
        cordon: () => failures.guard(() => execOk(lease.sandbox, "true", ctx.signal)),
        plain: () => failures.guard(() => execOk(plain, "true", ctx.signal)),
        cli: () => ctx.baselines.cliExec(container),
        api: () => ctx.baselines.apiExec(container),
        // Not budgets: they split cordon's cost into the login shell it runs, the wrapper
        // around it inside the container (cwd checks, process-tree sweep), and the rest.
        shell: () => ctx.baselines.apiExec(container, ["bash", "-lc", "true"]),
        wrapper: (run) => {
          const { cmd, env } = scriptInvocation(shellScript("execWrapper"), [
            "run",
            `bench${run + 10}`,
            lease.sandbox.workdir,
            "/",
            "true",
          ]);
          return ctx.baselines.apiExec(container, cmd, env);
        },
      },
      runs,
      3,
    );
    return {
      name: "warm-exec",
      title: "warm exec round trip: `true` in a running sandbox",
      comparisons: [
        // Issue 17's budget: with the resident executor a call opens no exec at all.
        withTarget(
          { measures: "exec true", ...compare(timings.cordon, timings.api, rawExec) },
          spec.docker.executor === "resident" ? 0.2 : 1.1,
        ),
        {
          measures: "exec true",
          ...compare(
            timings.cordon,
            timings.plain,
            'cordon with executor "exec" (one exec a call)',
          ),
        },
        withTarget(
          { measures: "exec true", ...compare(timings.cordon, timings.cli, "`docker exec` (CLI)") },
          0.85,
        ),
        {
          measures: "exec true",
          ...compare(timings.cordon, timings.shell, "one raw API exec of `bash -lc true`"),
        },
        {
          measures: "exec true",
          ...compare(timings.cordon, timings.wrapper, "one raw API exec of cordon's exec wrapper"),
        },
      ],
      failures: failures.count,
      details: { runs, executor: spec.docker.executor ?? "exec", ...failures.details() },
    };
  } finally {
    await lease.release();
    await ctx.baselines.removeContainer(lease.containerName);
  }
}
