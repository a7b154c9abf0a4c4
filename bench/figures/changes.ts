import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import {
  WorkspaceInspectors,
  baselineGitDir,
  baselinePathspecs,
  dockerWorkspaceChanges,
} from "../../src/sandbox/index.js";
import type { BenchContext } from "../context.js";
import { compare, timeInTurns } from "../measure.js";
import type { FigureResult } from "../report.js";
import { withTarget } from "../report.js";
import { FailureCount } from "./failures.js";
import { makeRepository, repositoryFiles } from "./seeded-session.js";

const run = promisify(execFile);

/** The budget: reading the changes in an inspector, against host git before it. */
const budget = 1.5;
const changedFiles = 10;

/**
 * What `cordon diff` and fix-tests' change-taking cost on a seeded 600-file repository with 10
 * changed files: the sandbox frozen while a throwaway inspector container diffs the copy
 * (`lease.changes.patch`), against what cordon did before the inspector — host git with the same
 * baseline git dir, a scratch index and object dir, on the same copy, the sandbox frozen the same
 * way. The bench wrote that copy itself (trusted), so host git may read it here.
 */
export async function changesFigure(ctx: BenchContext): Promise<FigureResult> {
  const runs = ctx.quick ? 3 : 10;
  const failures = new FailureCount();
  const root = await mkdtemp(path.join(tmpdir(), "cordon-bench-changes-"));
  const spec = { ...(await ctx.spec("changes")), seed: true };
  try {
    const repository = path.join(root, "repo");
    await mkdir(repository);
    await makeRepository(repository);
    const lease = await ctx.manager.acquire(
      { ...spec, agentWorkspace: repository },
      { signal: ctx.signal, readsChanges: true },
    );
    try {
      const copy = lease.privateWorkspace ?? "";
      for (let index = 0; index < changedFiles; index += 1) {
        await lease.sandbox.files.writeFile(
          `/workspace/src/module${index}/file0.ts`,
          `// changed by the bench ${index}\n`,
        );
      }
      ctx.progress(
        `changes: ${runs} diffs of a ${repositoryFiles}-file copy with ${changedFiles} changed files, each by an inspector container and by host git`,
      );
      let inspected = 0;
      let hostPatch = 0;
      // A reader of its own per run: no spare inspector is waiting (`cordon diff`, one reading).
      const coldReader = () =>
        dockerWorkspaceChanges({
          inspectors: new WorkspaceInspectors({ containers: ctx.engine.containers }),
          target: {
            sandboxName: `${spec.containerName}-cold`,
            workspace: copy,
            baselineGitDir: baselineGitDir(copy),
            image: ctx.image,
            user: spec.docker.user,
          },
          freeze: (fn) => lease.freeze(fn),
        });
      const timings = await timeInTurns(
        {
          cold: () =>
            failures.guard(async () => {
              const reader = coldReader();
              const patch = await reader.patch();
              // Removing its inspectors is not part of what `cordon diff` waits for.
              return () => reader.dispose().then(() => patch);
            }),
          // The lease's reader, prepared by `readsChanges`: a spare inspector is always waiting.
          warm: () =>
            failures.guard(async () => {
              inspected = (await lease.changes?.patch())?.byteLength ?? 0;
            }),
          hostGit: () =>
            lease.freeze(async () => {
              hostPatch = (await hostGitPatch(copy)).byteLength;
            }),
        },
        runs,
        1,
      );
      if (inspected !== hostPatch) failures.count += 1;
      return {
        name: "changes",
        title: `the changes of a seeded ${repositoryFiles}-file copy (cordon diff, fix-tests)`,
        comparisons: [
          withTarget(
            {
              measures: `freeze + diff of ${changedFiles} changed files, a spare inspector warm (fix-tests' readings)`,
              ...compare(timings.warm, timings.hostGit, hostGitBaseline),
            },
            budget,
          ),
          withTarget(
            {
              measures: `freeze + diff of ${changedFiles} changed files, the inspector started cold (cordon diff)`,
              ...compare(timings.cold, timings.hostGit, hostGitBaseline),
            },
            budget,
          ),
        ],
        failures: failures.count,
        details: {
          runs,
          files: repositoryFiles,
          changedFiles,
          patchBytes: inspected,
          samePatch: inspected === hostPatch ? "yes" : "no",
          ...failures.details(),
        },
      };
    } finally {
      await lease.release();
    }
  } finally {
    await ctx.inventory.remove(spec.containerName).catch(() => undefined);
    await rm(root, { recursive: true, force: true });
  }
}

const hostGitBaseline =
  "freeze + host git over the copy with cordon's baseline git dir (before the inspector)";

/** The host-git diff cordon ran before the inspector, as the baseline of this figure. */
async function hostGitPatch(copy: string): Promise<Buffer> {
  const gitDir = baselineGitDir(copy);
  const scratch = await mkdtemp(path.join(tmpdir(), "cordon-bench-scratch-"));
  const env = {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    LC_ALL: "C",
    GIT_DIR: gitDir,
    GIT_WORK_TREE: copy,
    GIT_INDEX_FILE: path.join(scratch, "index"),
    GIT_OBJECT_DIRECTORY: path.join(scratch, "objects"),
    GIT_ALTERNATE_OBJECT_DIRECTORIES: path.join(gitDir, "objects"),
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
  };
  const git = async (args: string[], input?: Uint8Array): Promise<Buffer> => {
    const child = run("git", ["-c", "safe.directory=*", "-c", "core.compression=1", ...args], {
      cwd: copy,
      env,
      encoding: "buffer",
      maxBuffer: 64 * 1024 * 1024,
    });
    if (input) child.child.stdin?.end(input);
    return (await child).stdout;
  };
  try {
    await mkdir(env.GIT_OBJECT_DIRECTORY);
    await git(["read-tree", "refs/cordon/baseline"]);
    await git(["add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"], baselinePathspecs());
    return await git([
      "diff",
      "--cached",
      "--binary",
      "--full-index",
      "--no-color",
      "--src-prefix=a/",
      "--dst-prefix=b/",
      "refs/cordon/baseline",
    ]);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
