/**
 * Carrying installed dependencies into the sandbox (`--carry`), as a CI job runs cordon after
 * `npm install`: npm projects whose devDependencies (mocha; vitest, which writes into
 * node_modules while it runs) come from the real npm registry, installed on the host, fixed by a
 * scripted agent in a container with no network. With `--carry node_modules` the fix is verified
 * (exit 0) and the patch holds the fix only; without it the tests cannot even start; a typo is a
 * usage error before any container exists.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { fixture, git, repositoryOf } from "../support/demo-repo.js";
import { dockerClient, removeContainersOfHome, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

const run = promisify(execFile);

interface ResultJson {
  status: string;
  exitCode: number;
  filesChanged: { path: string }[];
  before?: { exitCode: number | null; outputTail: string };
  verification?: { exitCode: number | null; outputTail: string };
  agent?: unknown;
  message: string;
}

/** The fixture as a git repository with its devDependencies installed from the npm registry. */
async function installedProject(name: string): Promise<string> {
  const repo = await repositoryOf(fixture("carry", name));
  await run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd: repo,
    timeout: 150_000,
  });
  // As a real project keeps it: the lockfile committed, node_modules ignored.
  git(repo, "add", "package-lock.json");
  git(repo, "commit", "-qm", "lockfile");
  return repo;
}

describe("cordon fix-tests --carry node_modules", () => {
  let home: string;
  let mochaProject: string;
  let vitestProject: string;
  const env = (): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    ANTHROPIC_API_KEY: "",
  });

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-carry-home-"));
    [mochaProject, vitestProject] = await Promise.all([
      installedProject("invoice-mocha"),
      installedProject("invoice-vitest"),
    ]);
  });

  afterAll(async () => {
    await removeContainersOfHome(home);
    await removeStateDirectory(home);
    for (const project of [mochaProject, vitestProject]) {
      if (project) await rm(path.dirname(project), { recursive: true, force: true });
    }
  });

  async function fixWith(project: string, script: string, out: string, ...extra: string[]) {
    const cli = await runCordon(
      [
        "fix-tests",
        "--workspace",
        project,
        "--test-cmd",
        "npm test",
        "--out",
        out,
        "--model-script",
        fixture("carry", script),
        ...extra,
      ],
      env(),
    );
    const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as ResultJson;
    const patch = await readFile(path.join(out, "changes.patch"), "utf8").catch(() => "");
    return { cli, result, patch };
  }

  it("mocha from node_modules: the fix is verified (exit 0), the patch holds only the fix, and the carry time is printed", async () => {
    const out = path.join(home, "mocha");
    const { cli, result, patch } = await fixWith(
      mochaProject,
      "fix-mocha.json",
      out,
      "--carry",
      "node_modules",
    );
    expect(cli.exitCode, cli.stderr).toBe(0);
    expect(result).toMatchObject({ status: "fixed", exitCode: 0, verification: { exitCode: 0 } });
    // The run before the agent really ran mocha, and it failed on the bug.
    expect(result.before?.outputTail).toMatch(/2 failing/);
    expect(result.filesChanged.map((file) => file.path)).toEqual(["src/vat.js"]);
    expect(patch).toContain("+  return Math.round(netCents * (1 + ratePercent / 100));");
    expect(patch).not.toContain("node_modules");
    expect(cli.stderr).toMatch(
      /carried node_modules: \d+ files, \d+ symlinks, [\d.]+ MiB in [\d.]+ s/,
    );
    if (process.getuid?.() === 0) {
      // Carried once: the verify copy layers the run's pristine snapshot (carry-layers.ts).
      expect(cli.stderr).toMatch(/copied once for this run, mounted read-only/);
      expect(cli.stderr).toMatch(/the run's copy reused: mounted read-only/);
    }
    // The user's repository and its installed dependencies are untouched.
    expect(git(mochaProject, "status", "--porcelain")).toBe("");
  });

  it("vitest, which writes node_modules/.vite-temp while it loads its config: verified (exit 0)", async () => {
    const out = path.join(home, "vitest");
    const { cli, result, patch } = await fixWith(
      vitestProject,
      "fix-vitest.json",
      out,
      "--carry",
      "node_modules",
    );
    expect(cli.exitCode, cli.stderr).toBe(0);
    expect(result).toMatchObject({ status: "fixed", exitCode: 0, verification: { exitCode: 0 } });
    expect(result.before?.outputTail).toMatch(/2 failed/);
    expect(result.verification?.outputTail).not.toMatch(/EROFS|EACCES/);
    expect(result.filesChanged.map((file) => file.path)).toEqual(["src/vat.js"]);
    expect(patch).not.toContain("node_modules");
  });

  it("cordon run --carry layers node_modules as fix-tests does, and --rm leaves no mount and no snapshot", async () => {
    const cli = await runCordon(
      [
        "run",
        "fix the failing test",
        "--workspace",
        mochaProject,
        "--session",
        "run-carry",
        "--carry",
        "node_modules",
        "--model-script",
        fixture("carry", "fix-mocha.json"),
        "--rm",
      ],
      env(),
    );
    expect(cli.exitCode, cli.stderr).toBe(0);
    // The agent's second `npm test` passed: mocha ran from the carried tree.
    expect(cli.stderr).toMatch(/exit 0: 3 passing/);
    if (process.getuid?.() === 0) {
      expect(cli.stderr).toMatch(
        /carried node_modules: .*mounted read-only beneath a private upper layer/,
      );
    }
    const workspaces = await readdir(path.join(home, "workspaces")).catch(() => []);
    expect(workspaces.filter((name) => name.startsWith(".carry-"))).toEqual([]);
    const mounts = await readFile("/proc/self/mountinfo", "utf8");
    expect(mounts).not.toContain(home);
    expect(git(mochaProject, "status", "--porcelain")).toBe("");
  });

  it("without --carry the ignored node_modules is not seeded: mocha or vitest is not found, exit 9 naming --carry, no agent", async () => {
    for (const [project, script, runner] of [
      [mochaProject, "fix-mocha.json", "mocha"],
      [vitestProject, "fix-vitest.json", "vitest"],
    ] as const) {
      const out = path.join(home, `no-carry-${runner}`);
      const { cli, result } = await fixWith(project, script, out);
      expect(result.before?.outputTail).toMatch(new RegExp(`${runner}: not found`));
      expect(result.status, result.message).toBe("environment_error");
      expect(cli.exitCode).toBe(9);
      expect(result.message).toMatch(/--carry node_modules/);
      // The environment, not the code: the scripted agent was never started.
      expect(result.agent).toBeUndefined();
    }
  });

  it("a typo in --carry is a usage error (exit 2) that names the path, before any sandbox starts", async () => {
    const ours = async () =>
      (await dockerClient().listContainers({ all: true })).filter(
        (info) => info.Labels["cordon.home"] === home,
      ).length;
    const before = await ours();
    const cli = await runCordon(
      [
        "fix-tests",
        "--workspace",
        mochaProject,
        "--test-cmd",
        "npm test",
        "--out",
        path.join(home, "typo"),
        "--model-script",
        fixture("carry", "fix-mocha.json"),
        "--carry",
        "node_moduels",
      ],
      env(),
    );
    expect(cli.exitCode).toBe(2);
    expect(`${cli.stdout}${cli.stderr}`).toContain(
      "--carry: node_moduels does not exist in the workspace",
    );
    expect(await ours()).toBe(before);
  });
});
