import { createSilentLogger } from "../../src/common/index.js";
import { ContainerExec } from "../../src/sandbox/docker/exec/container-exec.js";
import { ResidentTransport } from "../../src/sandbox/docker/resident/resident-transport.js";
import { DockerSandbox } from "../../src/sandbox/index.js";
import { scriptInvocation } from "../../src/sandbox/shell/command-line.js";
import { shellScript } from "../../src/sandbox/shell/shell-scripts.js";
import type { BenchContext } from "../context.js";
import { compare, timeInTurns } from "../measure.js";
import { withTarget, type FigureResult } from "../report.js";
import { FailureCount, execOk } from "./failures.js";

/**
 * Figure 1: `true` in a running sandbox through `DockerSandbox.exec`, against `docker exec`
 * through the CLI and one raw Engine API exec, all on the same container, in turns. Beside them
 * the floors under a warm exec, measured here rather than quoted: a line echoed by `cat` in an
 * exec stream left open (any channel into the container), the resident executor's round trip
 * with nothing started (a ping), and the executor starting `/bin/true` (one fork and exec, no
 * shell, no checks). What a warm exec costs above the last is the shell and cordon's own work.
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
    const details = await ctx.engine.containers.inspect(container);
    // Over the lease's own executor (one per container and user in this process).
    const executor = new ResidentTransport(
      new ContainerExec(
        ctx.engine.containers,
        details?.id ?? container,
        container,
        spec.docker.user,
      ),
      createSilentLogger(),
    );
    const echo = await ctx.baselines.echoStream(container);
    ctx.progress(`warm-exec: ${runs} runs each of cordon, docker exec (CLI), raw API exec, floors`);
    const resident = spec.docker.executor === "resident";
    // Without an executor (executor "exec") its floors are not measured (nor reported).
    const skip = (): Promise<void> => Promise.resolve();
    const floors = resident
      ? {
          ping: async () => {
            if (!(await executor.ping(ctx.signal))) throw new Error("no executor answered");
          },
          binTrue: async () => {
            const running = await executor.start({ cmd: ["/bin/true"], onOutput: () => undefined });
            const status = await running.exitCode;
            if (status !== 0) throw new Error(`/bin/true exited with ${status}`);
          },
        }
      : { ping: skip, binTrue: skip };
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
        echo: () => echo.echo(),
        ...floors,
      },
      runs,
      3,
    ).finally(() => echo.close());
    const floorComparisons = [
      {
        measures: "exec true",
        ...compare(timings.cordon, timings.echo, "a line echoed through an open exec stream"),
      },
      ...(resident
        ? [
            {
              measures: "exec true",
              ...compare(timings.cordon, timings.ping, "the executor's round trip (no process)"),
            },
            // Issue 31's budget: the command's shell and cordon's work on top of one process.
            withTarget(
              {
                measures: "exec true",
                ...compare(timings.cordon, timings.binTrue, "the executor starting /bin/true"),
              },
              2.5,
            ),
          ]
        : []),
    ];
    return {
      name: "warm-exec",
      title: "warm exec round trip: `true` in a running sandbox",
      comparisons: [
        // Issue 31's budget: with the resident executor a call opens no exec and no login shell.
        withTarget(
          { measures: "exec true", ...compare(timings.cordon, timings.api, rawExec) },
          resident ? 0.06 : 1.1,
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
        ...floorComparisons,
      ],
      failures: failures.count,
      details: { runs, executor: spec.docker.executor ?? "exec", ...failures.details() },
    };
  } finally {
    await lease.release();
    await ctx.baselines.removeContainer(lease.containerName);
  }
}
