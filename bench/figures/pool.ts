import { cp, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import type { SandboxSpec } from "../../src/sandbox/index.js";
import type { BenchContext } from "../context.js";
import { compare, timeInTurns } from "../measure.js";
import { withTarget, type FigureResult } from "../report.js";
import { FailureCount } from "./failures.js";
import { newSessionAndExec } from "./new-session.js";
import { makeRepository, repositoryFiles } from "./seeded-session.js";

/** What a pool of one gives each new session: a started member, and a refill after it. */
const pool = { size: 1 };

/**
 * The first result of a new session taken from the warm pool (docs/pool.md): `acquire` with
 * `sandbox.pool` and the first `exec true`, with a member waiting — the refill the previous
 * session started is waited for after its clock stopped, as a session that starts a while after
 * the last one finds it. Twice: an unseeded private workspace, and a seeded copy of the
 * 600-file repository of `seeded-session` (its fingerprint checked at every take). Baseline:
 * hardened `docker run -d` + `docker exec`, with `cp -a` of the repository for the seeded one.
 */
export async function poolFigure(ctx: BenchContext): Promise<FigureResult> {
  const runs = ctx.quick ? 2 : 10;
  const warmup = 1;
  const failures = new FailureCount();
  const root = await mkdtemp(path.join(tmpdir(), "cordon-bench-pool-"));
  try {
    const repository = path.join(root, "repo");
    await mkdir(repository);
    await makeRepository(repository);
    const template = await ctx.spec("pool-template");
    const specs = new Map<string, SandboxSpec>();
    const sessionOf = (kind: string, run: number): string => `pool-${kind}-${run + warmup}`;
    for (let run = -warmup; run < runs; run += 1) {
      specs.set(sessionOf("empty", run), await ctx.spec(sessionOf("empty", run)));
      const seeded = await ctx.spec(sessionOf("seeded", run));
      specs.set(sessionOf("seeded", run), { ...seeded, seed: true, agentWorkspace: repository });
    }

    const fromPool =
      (kind: string) =>
      async (run: number): Promise<() => Promise<void>> => {
        const spec = specs.get(sessionOf(kind, run));
        if (!spec) throw new Error(`no spec for run ${run}`);
        const remove = await failures.guard(() => newSessionAndExec(ctx, spec, { pool }));
        return async () => {
          await remove?.();
          await ctx.manager.flush();
        };
      };
    const plain =
      (copyFirst: boolean) =>
      async (run: number): Promise<() => Promise<void>> => {
        const name = ctx.baselineName(sessionOf(copyFirst ? "plain-copy" : "plain", run));
        const copy = path.join(root, `plain-${run + warmup}`);
        const cleanup = async (): Promise<void> => {
          await ctx.baselines.removeContainer(name);
          await rm(copy, { recursive: true, force: true });
        };
        try {
          if (copyFirst) await cp(repository, copy, { recursive: true, preserveTimestamps: true });
          await ctx.baselines.runHardened(
            name,
            template.docker,
            copyFirst ? copy : ctx.baselineWorkspace,
          );
          await ctx.baselines.cliExec(name);
        } catch (error) {
          await cleanup();
          throw error;
        }
        return cleanup;
      };

    ctx.progress(
      `pool: ${runs} new sessions from a warm pool, unseeded and seeded (${repositoryFiles} files), each beside docker run + docker exec`,
    );
    const timings = await timeInTurns(
      {
        empty: fromPool("empty"),
        seeded: fromPool("seeded"),
        plain: plain(false),
        plainCopy: plain(true),
      },
      runs,
      warmup,
    );
    const baseline = "`docker run -d` (hardened) + `docker exec`";
    return {
      name: "pool",
      title: "first result of a new session taken from the warm pool",
      comparisons: [
        withTarget(
          {
            measures: "new session from the pool + exec true",
            ...compare(timings.empty, timings.plain, baseline),
          },
          0.25,
        ),
        withTarget(
          {
            measures: "seeded session from the pool + exec true",
            ...compare(timings.seeded, timings.plain, baseline),
          },
          0.25,
        ),
        {
          measures: "seeded session from the pool + exec true",
          ...compare(
            timings.seeded,
            timings.plainCopy,
            `\`cp -a\` of the repository + ${baseline}`,
          ),
        },
      ],
      failures: failures.count,
      details: { runs, files: repositoryFiles, poolSize: pool.size, ...failures.details() },
    };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
