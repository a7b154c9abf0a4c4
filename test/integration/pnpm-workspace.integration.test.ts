/**
 * A pnpm workspace (two packages, one depending on the other through `workspace:*`, mocha from
 * the npm registry pinned in pnpm-lock.yaml, `packageManager` naming pnpm) fixed by fix-tests:
 * setup runs `pnpm install --frozen-lockfile` with the registry allowed, through the image's
 * corepack pnpm; the scripted agent fixes the bug in one package that fails the tests of both;
 * verification installs again in its fresh copy and the workspace's tests pass (exit 0) with a
 * patch of the source file only. Without setup, the fix named is pnpm's, not npm's (exit 9).
 */
import { cp, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { fixture, git, trustHostCertificatesConfig } from "../support/demo-repo.js";
import { removeContainersOfHome, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

interface ResultJson {
  status: string;
  exitCode: number;
  message: string;
  setupRuns?: { exitCode: number }[];
  before?: { exitCode: number | null; outputTail: string };
  agent?: unknown;
  verification?: { exitCode: number | null; outputTail: string };
  filesChanged: { path: string }[];
}

describe("fix-tests on a pnpm workspace", () => {
  let home: string;
  let root: string;
  let repo: string;
  let trustConfig: string;
  const env = (): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    ANTHROPIC_API_KEY: "",
  });

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-pnpm-home-"));
    root = await mkdtemp(path.join(tmpdir(), "cordon-pnpm-project-"));
    repo = path.join(root, "units");
    await cp(fixture("pnpm-workspace"), repo, { recursive: true });
    git(repo, "init", "-q");
    git(repo, "add", "-A");
    git(repo, "commit", "-qm", "units monorepo");
    // This machine's egress inspects TLS: the setup phase trusts the host's CA bundle, as
    // docs/network.md tells users behind such a proxy to.
    trustConfig = await trustHostCertificatesConfig(home);
  });

  afterAll(async () => {
    await removeContainersOfHome(home);
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
  });

  it("pnpm install in setup, the fix in one package verified across both (exit 0), a patch of that file only", async () => {
    const out = path.join(root, "out-fixed");
    const run = await runCordon(
      [
        "fix-tests",
        "--workspace",
        repo,
        "--config",
        trustConfig,
        "--test-cmd",
        "pnpm test",
        "--setup-cmd",
        "pnpm install --frozen-lockfile",
        "--setup-allow-host",
        "registry.npmjs.org",
        "--model-script",
        fixture("fix-tests", "pnpm-units-fix.json"),
        "--out",
        out,
      ],
      env(),
    );
    const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as ResultJson;
    expect(result.status, `${result.message}\n${run.stderr}`).toBe("fixed");
    expect(run.exitCode).toBe(0);
    expect(result.setupRuns?.map((s) => s.exitCode)).toEqual([0, 0]);
    // Before the agent, mocha really ran in both packages and failed on inches.
    expect(result.before?.outputTail).toMatch(/1 in|1\.2 != 12|304\.8/);
    expect(result.verification?.exitCode).toBe(0);
    expect(result.filesChanged.map((f) => f.path)).toEqual(["packages/convert/src/index.js"]);
    const patch = await readFile(path.join(out, "changes.patch"), "utf8");
    expect(patch).toContain("+  in: 0.0254,");
    expect(patch).not.toMatch(/node_modules|pnpm-store|pnpm-lock/);
    expect(git(repo, "status", "--porcelain")).toBe("");
  }, 600_000);

  it("without setup, pnpm's own install is the fix named (exit 9), no agent", async () => {
    const out = path.join(root, "out-no-setup");
    const run = await runCordon(
      [
        "fix-tests",
        "--workspace",
        repo,
        "--test-cmd",
        "pnpm test",
        "--model-script",
        fixture("fix-tests", "pnpm-units-fix.json"),
        "--out",
        out,
      ],
      env(),
    );
    const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as ResultJson;
    expect(result.status, `${result.message}\n${run.stderr}`).toBe("environment_error");
    expect(run.exitCode).toBe(9);
    expect(result.message).toMatch(/pnpm install --frozen-lockfile/);
    expect(result.message).not.toMatch(/npm ci/);
    expect(result.agent).toBeUndefined();
  }, 600_000);
});
