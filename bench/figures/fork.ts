import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import type { SandboxSpec } from "../../src/sandbox/index.js";
import type { BenchContext } from "../context.js";
import { compare, timeInTurns } from "../measure.js";
import type { FigureResult } from "../report.js";
import { FailureCount } from "./failures.js";
import { newSessionAndExec } from "./new-session.js";
import { makeRepository, repositoryFiles } from "./seeded-session.js";

const changedFiles = 10;

/**
 * `cordon fork` of a seeded 600-file copy with 10 changed files (`DockerSandboxManager.fork`, as
 * `cordon fork` and fix-tests' attempts call it: the parent frozen while a throwaway inspector
 * `cp -a`s its copy into the fork's new one, the baseline copied, a container of its own) and
 * the fork's first `exec true`, against a new session seeded from the same repository in the
 * same run — the other way to get a second copy to work in. No budget (issue 30 sets none).
 */
export async function forkFigure(ctx: BenchContext): Promise<FigureResult> {
  const runs = ctx.quick ? 2 : 8;
  const warmup = 1;
  const failures = new FailureCount();
  const root = await mkdtemp(path.join(tmpdir(), "cordon-bench-fork-"));
  const repository = path.join(root, "repo");
  const seeded = async (name: string): Promise<SandboxSpec> => ({
    ...(await ctx.spec(name)),
    seed: true,
    agentWorkspace: repository,
  });
  const made: string[] = [];
  try {
    await mkdir(repository);
    await makeRepository(repository);
    const parent = await seeded("fork-parent");
    made.push(parent.containerName);
    const lease = await ctx.manager.acquire(parent, { signal: ctx.signal });
    try {
      for (let index = 0; index < changedFiles; index += 1) {
        await lease.sandbox.files.writeFile(
          `/workspace/src/module${index}/file0.ts`,
          "// changed in the parent\n",
        );
      }
    } finally {
      await lease.release();
    }
    // A fork's copy has changes: removing it discards them on purpose.
    const remove = async (name: string): Promise<void> => {
      await ctx.inventory.remove(name, { discardChanges: true }).catch(() => undefined);
    };
    let sawParent = 0;
    const fork = (run: number): Promise<() => Promise<void>> =>
      failures
        .guard(async () => {
          const target = await seeded(`fork-${run + warmup}`);
          made.push(target.containerName);
          const forked = await ctx.manager.fork(parent, target, { signal: ctx.signal });
          try {
            // The fork's first command reads one of the parent's changes: its state is there.
            const seen = await forked.sandbox.exec("cat src/module9/file0.ts", {
              signal: ctx.signal,
            });
            if (seen.stdout === "// changed in the parent\n") sawParent += 1;
          } finally {
            await forked.release();
          }
          return () => remove(target.containerName);
        })
        .then((cleanup) => cleanup ?? (() => Promise.resolve()));
    const fresh = async (run: number): Promise<() => Promise<void>> => {
      const spec = await seeded(`fork-seeded-${run + warmup}`);
      made.push(spec.containerName);
      return newSessionAndExec(ctx, spec);
    };

    ctx.progress(
      `fork: ${runs} forks of a seeded ${repositoryFiles}-file copy with ${changedFiles} changed files, each beside a new seeded session`,
    );
    const timings = await timeInTurns(
      { fork, seeded: (run) => failures.guard(() => fresh(run)) },
      runs,
      warmup,
    );
    if (sawParent !== runs + warmup) failures.count += 1;
    return {
      name: "fork",
      title: `a fork of a seeded ${repositoryFiles}-file copy`,
      comparisons: [
        {
          measures: `fork of a copy with ${changedFiles} changed files (freeze + an inspector's cp -a + baseline + a container) + its first exec`,
          ...compare(
            timings.fork,
            timings.seeded,
            "a new session seeded from the same repository + its first exec true",
          ),
        },
      ],
      failures: failures.count,
      details: {
        runs,
        files: repositoryFiles,
        changedFiles,
        forksThatSawTheParent: sawParent,
        ...failures.details(),
      },
    };
  } finally {
    // What a failed run left (a removal after the clock stopped, or one that never came).
    for (const name of new Set(made)) {
      await ctx.inventory.remove(name, { discardChanges: true }).catch(() => undefined);
    }
    await rm(root, { recursive: true, force: true });
  }
}
