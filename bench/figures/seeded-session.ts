import { execFile } from "node:child_process";
import { cp, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import type { BenchContext } from "../context.js";
import { compare, timeInTurns } from "../measure.js";
import type { FigureResult } from "../report.js";
import { FailureCount } from "./failures.js";
import { newSessionAndExec } from "./new-session.js";

const run = promisify(execFile);

/** Shape of the generated repository: about as many files as a small real project. */
const directories = 30;
const filesPerDirectory = 20;
export const repositoryFiles = directories * filesPerDirectory;

/**
 * A git repository like a small real project: 600 source files in 30 directories, three commits,
 * an ignored build directory and two untracked files. Written by the bench itself (trusted), so
 * host git may run in it.
 */
export async function makeRepository(root: string): Promise<void> {
  const git = (...args: string[]) =>
    run("git", args, {
      cwd: root,
      env: {
        PATH: process.env["PATH"] ?? "/usr/bin:/bin",
        GIT_CONFIG_GLOBAL: "/dev/null",
        GIT_CONFIG_NOSYSTEM: "1",
        GIT_AUTHOR_NAME: "bench",
        GIT_AUTHOR_EMAIL: "bench@localhost",
        GIT_COMMITTER_NAME: "bench",
        GIT_COMMITTER_EMAIL: "bench@localhost",
      },
    });
  await git("init", "-q");
  await writeFile(path.join(root, ".gitignore"), "build/\n");
  for (let commit = 0; commit < 3; commit += 1) {
    for (let d = 0; d < directories; d += 1) {
      const dir = path.join(root, "src", `module${d}`);
      await mkdir(dir, { recursive: true });
      for (let f = 0; f < filesPerDirectory; f += 1) {
        const body = `// module ${d} file ${f}, revision ${commit}\n${"export const value = 1;\n".repeat(40)}`;
        await writeFile(path.join(dir, `file${f}.ts`), body);
      }
    }
    await git("add", "-A");
    await git("commit", "-qm", `revision ${commit}`);
  }
  await mkdir(path.join(root, "build"));
  await writeFile(path.join(root, "build", "out.js"), "ignored\n");
  await writeFile(path.join(root, "NOTES.md"), "untracked\n");
  await writeFile(path.join(root, "src", "scratch.ts"), "untracked\n");
}

/**
 * The first result of a new session that works on a seeded copy of a 600-file git repository:
 * cordon's acquire (seeding, baseline, create, start) and first `exec true`, against the plain
 * way to give a container a copy — `cp -a` of the repository, `docker run -d` (hardened) with it
 * bind-mounted, `docker exec true`. The copy's safety work (what seeding adds beyond a copy) is
 * what the ratio shows.
 */
export async function seededSession(ctx: BenchContext): Promise<FigureResult> {
  const runs = ctx.quick ? 2 : 8;
  const warmup = 1;
  const failures = new FailureCount();
  const root = await mkdtemp(path.join(tmpdir(), "cordon-bench-seed-"));
  try {
    const repository = path.join(root, "repo");
    await mkdir(repository);
    await makeRepository(repository);
    const sessionOf = (index: number): string => `seeded-${index + warmup}`;
    const specs = new Map<string, Awaited<ReturnType<BenchContext["spec"]>>>();
    for (let index = -warmup; index < runs; index += 1) {
      const spec = await ctx.spec(sessionOf(index));
      specs.set(sessionOf(index), { ...spec, seed: true, agentWorkspace: repository });
    }
    const template = await ctx.spec("seeded-template");

    const cordon = (index: number): Promise<() => Promise<void>> => {
      const spec = specs.get(sessionOf(index));
      if (!spec) throw new Error(`no spec for run ${index}`);
      return newSessionAndExec(ctx, spec);
    };
    const plain = async (index: number): Promise<() => Promise<void>> => {
      const name = ctx.baselineName(sessionOf(index));
      const copy = path.join(root, `plain-${index + warmup}`);
      const cleanup = async (): Promise<void> => {
        await ctx.baselines.removeContainer(name);
        await rm(copy, { recursive: true, force: true });
      };
      try {
        await cp(repository, copy, { recursive: true, preserveTimestamps: true });
        await ctx.baselines.runHardened(name, template.docker, copy);
        await ctx.baselines.cliExec(name);
      } catch (error) {
        await cleanup();
        throw error;
      }
      return cleanup;
    };

    ctx.progress(
      `seeded-session: ${runs} new sessions on a ${directories * filesPerDirectory}-file repository, each of cordon and cp -a + docker run + docker exec`,
    );
    const timings = await timeInTurns(
      { cordon: (index) => failures.guard(() => cordon(index)), plain },
      runs,
      warmup,
    );
    return {
      name: "seeded-session",
      title: "first result of a new session on a seeded copy of a 600-file repository",
      comparisons: [
        {
          measures: "seed + new session + exec true",
          ...compare(
            timings.cordon,
            timings.plain,
            "`cp -a` of the repository + `docker run -d` (hardened) + `docker exec`",
          ),
        },
      ],
      failures: failures.count,
      details: { runs, files: directories * filesPerDirectory, ...failures.details() },
    };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
