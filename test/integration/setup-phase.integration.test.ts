/**
 * `cordon fix-tests --setup-cmd "npm ci" --setup-allow-host registry.npmjs.org` on an npm project
 * whose tests need devDependencies from the real npm registry (mocha, pinned in its lockfile):
 * setup installs them through the egress proxy, the scripted agent then runs with the run's own
 * policy — no network: its curl to the registry fails — fixes the code, and verification reruns
 * `npm ci` in its fresh copy before the tests pass (exit 0). A setup that needs a host off its
 * list fails before any agent turn, naming the refused host and the flag that allows it.
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
  fix?: string;
  setupRuns?: { exitCode: number; refused: string[] }[];
  agent?: { status: string };
  verification?: { exitCode: number };
  filesChanged: { path: string }[];
  durationsMs: { setup: number; total: number };
}

describe("fix-tests with a setup phase", () => {
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
    home = await mkdtemp(path.join(tmpdir(), "cordon-setup-home-"));
    root = await mkdtemp(path.join(tmpdir(), "cordon-npm-project-"));
    repo = path.join(root, "repo");
    await cp(fixture("npm-ci-project"), repo, { recursive: true });
    git(repo, "init", "-q");
    git(repo, "add", "-A");
    git(repo, "commit", "-qm", "slug library");
    // This machine's egress inspects TLS (as a corporate proxy does): the user's own config says
    // to trust the host's CA bundle, as docs/network.md tells them to.
    trustConfig = await trustHostCertificatesConfig(home);
  });

  afterAll(async () => {
    await removeContainersOfHome(home);
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
  });

  it("npm ci with the registry allowed, an agent with no network, a verified fix (exit 0)", async () => {
    const out = path.join(root, "out-fixed");
    const run = await runCordon(
      [
        "fix-tests",
        "--workspace",
        repo,
        "--config",
        trustConfig,
        "--test-cmd",
        "npm test",
        "--setup-cmd",
        "npm ci",
        "--setup-allow-host",
        "registry.npmjs.org",
        "--model-script",
        fixture("fix-tests", "npm-slug-fix.json"),
        "--out",
        out,
        "--json",
      ],
      env(),
    );
    const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as ResultJson;
    expect(result.status, `${result.message}\n${run.stderr}`).toBe("fixed");
    expect(run.exitCode).toBe(0);
    // Setup ran twice: in the work copy, and again in verification's fresh copy.
    expect(result.setupRuns?.map((s) => s.exitCode)).toEqual([0, 0]);
    expect(result.filesChanged.map((f) => f.path)).toEqual(["src/slug.js"]);
    expect(run.stderr).toMatch(/egress allowed: registry\.npmjs\.org:443/);

    // The agent phase had the run's own policy (none): its curl to the registry failed.
    const transcript = await readFile(path.join(out, "transcript.jsonl"), "utf8");
    // (A tool result's output: a line of its own, where the command itself names both words
    // after `echo `. curl's stderr and echo's stdout may arrive in either order.)
    expect(transcript).toMatch(/Could not resolve host: registry\.npmjs\.org/);
    expect(transcript).toMatch(/(?:"text":"|\\n)REGISTRY-UNREACHABLE/);
    expect(transcript).not.toMatch(/(?:"text":"|\\n)REGISTRY-REACHED/);
    // node_modules came from setup, and is no part of the patch.
    expect(await readFile(path.join(out, "changes.patch"), "utf8")).not.toContain("node_modules");
  }, 600_000);

  it("without --setup-cmd its devDependencies are not there: exit 9 naming --setup-cmd, no agent", async () => {
    const out = path.join(root, "out-no-setup");
    const run = await runCordon(
      [
        "fix-tests",
        "--workspace",
        repo,
        "--test-cmd",
        "npm test",
        "--model-script",
        fixture("fix-tests", "npm-slug-fix.json"),
        "--out",
        out,
      ],
      env(),
    );
    const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as ResultJson;
    expect(result.status, result.message).toBe("environment_error");
    expect(run.exitCode).toBe(9);
    expect(result.message).toMatch(/--setup-cmd/);
    expect(result.agent).toBeUndefined();
  }, 600_000);

  it("a setup that needs a host off its list fails before the agent, naming the host", async () => {
    const out = path.join(root, "out-refused");
    const run = await runCordon(
      [
        "fix-tests",
        "--workspace",
        repo,
        "--config",
        trustConfig,
        "--test-cmd",
        "npm test",
        "--setup-cmd",
        "curl -fsS -o /dev/null https://registry.yarnpkg.com/mocha",
        "--setup-allow-host",
        "registry.npmjs.org",
        "--model-script",
        fixture("fix-tests", "no-turns.json"),
        "--out",
        out,
      ],
      env(),
    );
    const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as ResultJson;
    expect(result.status, result.message).toBe("setup_failed");
    expect(run.exitCode).toBe(9);
    expect(result.agent).toBeUndefined();
    expect(result.setupRuns?.[0]?.refused).toContain("registry.yarnpkg.com");
    expect(result.message).toMatch(/--setup-allow-host registry\.yarnpkg\.com/);
    // The failed setup is the job's time, not nothing (summary.md's "setup" once said 0.0s).
    expect(result.durationsMs.setup).toBeGreaterThan(0);
    expect(result.durationsMs.setup).toBeLessThanOrEqual(result.durationsMs.total);
  }, 600_000);

  it("run --setup-cmd that fails ends as fix-tests does: setup_failed, exit 9, no model call", async () => {
    const run = await runCordon(
      [
        "run",
        "--workspace",
        repo,
        "--config",
        trustConfig,
        "--session",
        "setup-refused",
        "--rm",
        "--setup-cmd",
        "curl -fsS -o /dev/null https://registry.yarnpkg.com/mocha",
        "--setup-allow-host",
        "registry.npmjs.org",
        // A model call would fail the script (it has no turns): the run must not get there.
        "--model-script",
        fixture("fix-tests", "no-turns.json"),
        "--output-format",
        "json",
        "fix the slug",
      ],
      env(),
    );
    const result = JSON.parse(run.stdout) as ResultJson & { turns: number };
    expect(result.status, `${result.message}\n${run.stderr}`).toBe("setup_failed");
    expect(run.exitCode).toBe(9);
    expect(result.exitCode).toBe(9);
    expect(result.turns).toBe(0);
    // The fix is said once, in its own field (and line), not also in the message.
    expect(result.fix).toMatch(/--setup-allow-host registry\.yarnpkg\.com/);
    expect(result.message).not.toMatch(/--setup-allow-host/);
    expect(run.stderr).toMatch(/setup egress REFUSED: registry\.yarnpkg\.com:443/);
  }, 600_000);

  it("a failed run --setup-cmd leaves the session a sandbox, with what setup wrote, not an orphan", async () => {
    const session = ["--workspace", repo, "--session", "setup-half-done"];
    const run = await runCordon(
      [
        "run",
        ...session,
        "--setup-cmd",
        "echo half > half-done.txt; exit 3",
        "--model-script",
        fixture("fix-tests", "no-turns.json"),
        "fix the slug",
      ],
      env(),
    );
    expect(run.exitCode, run.stderr).toBe(9);
    const listed = await runCordon(["sandbox", "list", "--json"], env());
    const sandboxes = JSON.parse(listed.stdout) as {
      sandboxes: { session?: string }[];
      orphans: unknown[];
    };
    // Before, the setup's container was removed and the copy left without one: an "orphaned
    // workspace, whose container is gone", and `cordon diff` said the session had no sandbox.
    expect(sandboxes.orphans).toEqual([]);
    expect(sandboxes.sandboxes.map((sandbox) => sandbox.session)).toContain(
      "agent:main:setup-half-done",
    );
    const diff = await runCordon(["diff", ...session, "--stat"], env());
    expect(diff.exitCode, diff.stderr).toBe(0);
    expect(diff.stdout).toMatch(/half-done\.txt/);
  }, 600_000);
});
