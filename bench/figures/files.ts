import { randomBytes } from "node:crypto";

import type { BenchContext } from "../context.js";
import { compare, timeInTurns } from "../measure.js";
import { withTarget, type FigureComparison, type FigureResult } from "../report.js";
import { FailureCount } from "./failures.js";

const sizes = [
  { label: "1 KiB", bytes: 1024, runs: 30, quickRuns: 5 },
  { label: "10 MiB", bytes: 10 * 1024 * 1024, runs: 10, quickRuns: 2 },
] as const;

/**
 * Figure 3: a file written and read back through `DockerSandbox.writeFile` / `readFile`, against
 * `docker cp` in and out of the same container (into its bind-mounted workspace: `docker cp`
 * cannot write into a read-only root). For 1 KiB, each of write and read alone is also set
 * beside one raw API exec: a file operation is one exec, and should cost no more.
 */
export async function files(ctx: BenchContext): Promise<FigureResult> {
  const spec = await ctx.spec("files");
  const lease = await ctx.manager.acquire(spec, { signal: ctx.signal });
  const sandbox = lease.sandbox;
  const failures = new FailureCount();
  const comparisons: FigureComparison[] = [];
  const details: Record<string, number | string> = {};
  try {
    for (const size of sizes) {
      const runs = ctx.quick ? size.quickRuns : size.runs;
      const bytes = new Uint8Array(randomBytes(size.bytes));
      const cordonPath = `${sandbox.workdir}/bench-cordon.bin`;
      const cpPath = `${sandbox.workdir}/bench-cp.bin`;
      const fixture = await ctx.baselines.cpFixture(bytes);
      const roundTrip = async (): Promise<void> => {
        await sandbox.files.writeFile(cordonPath, bytes, { signal: ctx.signal });
        const back = await sandbox.files.readFile(cordonPath, { signal: ctx.signal });
        if (!Buffer.from(back).equals(Buffer.from(bytes))) {
          throw new Error(
            `read back ${back.length} bytes that differ from the ${bytes.length} written`,
          );
        }
      };
      ctx.progress(`files: ${size.label}, ${runs} runs each of cordon and docker cp`);
      try {
        const timings = await timeInTurns(
          {
            cordon: () => failures.guard(roundTrip),
            cp: () => fixture.roundTrip(lease.containerName, cpPath),
          },
          runs,
          1,
        );
        const comparison = {
          measures: `${size.label} write + read`,
          ...compare(timings.cordon, timings.cp, "`docker cp` in + `docker cp` out"),
        };
        const large = size.bytes >= 1024 * 1024;
        comparisons.push(large ? withTarget(comparison, 1.0) : comparison);
        if (large) {
          // Each half on its own, to tell which direction costs what.
          ctx.progress(`files: ${size.label}, write alone and read alone, ${runs} runs each`);
          const halves = await timeInTurns(
            {
              write: () =>
                failures.guard(() =>
                  sandbox.files.writeFile(cordonPath, bytes, { signal: ctx.signal }),
                ),
              read: () =>
                failures.guard(() => sandbox.files.readFile(cordonPath, { signal: ctx.signal })),
              copyIn: () => fixture.copyIn(lease.containerName, cpPath),
              copyOut: () => fixture.copyOut(lease.containerName, cpPath),
            },
            runs,
            1,
          );
          comparisons.push(
            withTarget(
              {
                measures: `${size.label} write`,
                ...compare(halves.write, halves.copyIn, "`docker cp` in"),
              },
              0.7,
            ),
            withTarget(
              {
                measures: `${size.label} read`,
                ...compare(halves.read, halves.copyOut, "`docker cp` out"),
              },
              0.7,
            ),
          );
        }
      } finally {
        await fixture.dispose();
      }
      details[`runs${size.label.replace(/\s/g, "")}`] = runs;
    }

    const small = new Uint8Array(randomBytes(1024));
    const runs = ctx.quick ? 5 : 30;
    const path = `${sandbox.workdir}/bench-single.bin`;
    await sandbox.files.writeFile(path, small);
    ctx.progress(`files: 1 KiB write alone and read alone vs one raw exec, ${runs} runs each`);
    const single = await timeInTurns(
      {
        write: () => failures.guard(() => sandbox.files.writeFile(path, small)),
        read: () => failures.guard(() => sandbox.files.readFile(path)),
        api: () => ctx.baselines.apiExec(lease.containerName),
      },
      runs,
      2,
    );
    const rawExec = "one raw Docker API exec (dockerode)";
    // Issue 17's budgets; through plain exec a file operation is one exec, held to 1.1.
    const smallTarget = spec.docker.executor === "resident" ? 0.1 : 1.1;
    comparisons.push(
      withTarget(
        { measures: "1 KiB write", ...compare(single.write, single.api, rawExec) },
        smallTarget,
      ),
      withTarget(
        { measures: "1 KiB read", ...compare(single.read, single.api, rawExec) },
        smallTarget,
      ),
    );
    return {
      name: "files",
      title: "write + read of 1 KiB and 10 MiB files",
      comparisons,
      failures: failures.count,
      details: { ...details, executor: spec.docker.executor ?? "exec", ...failures.details() },
    };
  } finally {
    await lease.release();
    await ctx.baselines.removeContainer(lease.containerName);
  }
}
