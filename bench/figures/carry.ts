import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import {
  ensurePrivateWorkspace,
  privateWorkspacePath,
  releaseWorkspaceDisksBelow,
  type CarrySummary,
} from "../../src/sandbox/workspace/index.js";
import type { BenchContext } from "../context.js";
import { compare, summarise, timeInTurns } from "../measure.js";
import { withTarget, type FigureResult } from "../report.js";
import { FailureCount } from "./failures.js";

const run = promisify(execFile);

/**
 * Shape of the generated node_modules: about what `npm ci` leaves for a mid-size web project —
 * 400 packages of 50 files, most of them a few KiB, a few larger bundles, `.bin` links — about
 * 100 MiB in 20 000 files (issue 25's figure: a 110 MiB, 19 649-file tree).
 */
const packages = 400;
const filesPerPackage = 50;

/** File sizes in bytes, repeating: mostly small modules, now and then a larger bundle. */
function fileSize(index: number): number {
  if (index % 97 === 0) return 64 * 1024;
  if (index % 13 === 0) return 24 * 1024;
  return 1024 + ((index * 2654435761) % (5 * 1024));
}

/** A git project (a few sources, node_modules ignored) with a generated node_modules. */
async function makeProject(
  root: string,
  quick: boolean,
): Promise<{ files: number; bytes: number }> {
  await mkdir(path.join(root, "src"), { recursive: true });
  await writeFile(path.join(root, ".gitignore"), "node_modules/\n");
  await writeFile(path.join(root, "package.json"), '{ "scripts": { "test": "mocha" } }\n');
  await writeFile(path.join(root, "src", "index.js"), "module.exports = 1;\n");
  const env = {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_AUTHOR_NAME: "bench",
    GIT_AUTHOR_EMAIL: "bench@localhost",
    GIT_COMMITTER_NAME: "bench",
    GIT_COMMITTER_EMAIL: "bench@localhost",
  };
  for (const args of [
    ["init", "-q"],
    ["add", "-A"],
    ["commit", "-qm", "project"],
  ]) {
    await run("git", args, { cwd: root, env });
  }
  const modules = path.join(root, "node_modules");
  await mkdir(path.join(modules, ".bin"), { recursive: true });
  let files = 0;
  let bytes = 0;
  const count = quick ? packages / 10 : packages;
  for (let p = 0; p < count; p += 1) {
    const lib = path.join(modules, `package-${p}`, "lib");
    await mkdir(lib, { recursive: true });
    await writeFile(
      path.join(modules, `package-${p}`, "package.json"),
      `{ "name": "package-${p}" }\n`,
    );
    for (let f = 0; f < filesPerPackage; f += 1) {
      const size = fileSize(p * filesPerPackage + f);
      await writeFile(path.join(lib, `module-${f}.js`), randomBytes(size));
      files += 1;
      bytes += size;
    }
    if (p % 10 === 0) {
      await symlink(`../package-${p}/lib/module-0.js`, path.join(modules, ".bin", `tool-${p}`));
    }
  }
  return { files, bytes };
}

/**
 * Seeding a private copy of a project with its ~150 MiB node_modules carried (`--carry
 * node_modules`): cordon's whole seed (git listing, the carry through the safe tree copier,
 * the baseline, the disk-budget image where it is enforced) against a plain `cp -a` of just the
 * node_modules — the least any way of putting the dependencies in a container's copy costs.
 */
export async function carry(ctx: BenchContext): Promise<FigureResult> {
  const runs = ctx.quick ? 2 : 5;
  const warmup = 1;
  const failures = new FailureCount();
  const root = await mkdtemp(path.join(tmpdir(), "cordon-bench-carry-"));
  try {
    const project = path.join(root, "project");
    const generated = await makeProject(project, ctx.quick);
    const template = await ctx.spec("carry-template");
    const carried: CarrySummary[] = [];

    const cordon = async (index: number): Promise<() => Promise<void>> => {
      const stateDirectory = path.join(root, `state-${index + warmup}`);
      const cleanup = async (): Promise<void> => {
        await releaseWorkspaceDisksBelow(stateDirectory);
        await rm(stateDirectory, { recursive: true, force: true });
      };
      const spec = {
        ...template,
        seed: true,
        agentWorkspace: project,
        carry: ["node_modules"],
        privateWorkspace: privateWorkspacePath(stateDirectory, template.containerName),
      };
      try {
        const workspace = await ensurePrivateWorkspace(spec, {
          stateDirectory,
          signal: ctx.signal,
        });
        if (workspace.seed?.carried && index >= 0) carried.push(workspace.seed.carried);
      } catch (error) {
        await cleanup();
        throw error;
      }
      return cleanup;
    };
    /**
     * fix-tests' verify copy: a second seed with the run's share key, after a first one made the
     * snapshot (untimed, done before the clock starts). Only the second seed is timed.
     */
    const secondCopy = async (index: number): Promise<() => Promise<void>> => {
      const stateDirectory = path.join(root, `shared-${index + warmup}`);
      const shareKey = `bench${index + warmup}`;
      const specFor = (name: string) => ({
        ...template,
        containerName: `${template.containerName}-${name}`,
        seed: true,
        agentWorkspace: project,
        carry: ["node_modules"],
        carryShare: shareKey,
        privateWorkspace: privateWorkspacePath(stateDirectory, `${template.containerName}-${name}`),
      });
      const cleanup = async (): Promise<void> => {
        await releaseWorkspaceDisksBelow(stateDirectory);
        await rm(stateDirectory, { recursive: true, force: true });
      };
      try {
        await ensurePrivateWorkspace(specFor("work"), { stateDirectory, signal: ctx.signal });
        const started = performance.now();
        const verify = await ensurePrivateWorkspace(specFor("verify"), {
          stateDirectory,
          signal: ctx.signal,
        });
        if (index >= 0) {
          secondCopies.push(performance.now() - started);
          secondMethod = verify.seed?.carried?.method ?? "none";
        }
      } catch (error) {
        await cleanup();
        throw error;
      }
      return cleanup;
    };
    const secondCopies: number[] = [];
    let secondMethod = "none";
    const plain = async (index: number): Promise<() => Promise<void>> => {
      const copy = path.join(root, `plain-${index + warmup}`);
      await mkdir(copy);
      await run("cp", ["-a", path.join(project, "node_modules"), copy]);
      return () => rm(copy, { recursive: true, force: true });
    };

    ctx.progress(
      `carry: ${runs} seeds of a project with a ${Math.round(generated.bytes / 1024 ** 2)} MiB node_modules (${generated.files} files) carried, and ${runs} second copies of a run, each beside cp -a of it`,
    );
    const timings = await timeInTurns(
      {
        cordon: (index) => failures.guard(() => cordon(index)),
        second: (index) => failures.guard(() => secondCopy(index)),
        plain,
      },
      runs,
      warmup,
    );
    const carryOnly = summarise(carried.map((summary) => summary.durationMs));
    return {
      name: "carry",
      title: `seeding with a ${Math.round(generated.bytes / 1024 ** 2)} MiB node_modules carried`,
      comparisons: [
        {
          measures: "seed with node_modules carried",
          ...compare(timings.cordon, timings.plain, "`cp -a` of the node_modules"),
        },
        {
          measures: "the carry alone (tree copy of node_modules)",
          ...compare(carryOnly, timings.plain, "`cp -a` of the node_modules"),
        },
        // Issue 25's budget: fix-tests' verify copy carries nothing again.
        withTarget(
          {
            measures: "the second copy of a run (fix-tests' verify seed, carry shared)",
            ...compare(summarise(secondCopies), timings.plain, "`cp -a` of the node_modules"),
          },
          0.5,
        ),
      ],
      failures: failures.count,
      details: {
        runs,
        files: generated.files,
        mebibytes: Math.round((generated.bytes / 1024 ** 2) * 10) / 10,
        method: carried[0]?.method ?? "none",
        secondCopyMethod: secondMethod,
        diskBudget: diskBudgetOf(template.diskBytes),
        ...failures.details(),
      },
    };
  } finally {
    await releaseWorkspaceDisksBelow(root);
    await rm(root, { recursive: true, force: true });
  }
}

function diskBudgetOf(bytes: number | undefined): string {
  return bytes === undefined ? "none" : `${Math.round(bytes / 1024 ** 3)} GiB image`;
}
