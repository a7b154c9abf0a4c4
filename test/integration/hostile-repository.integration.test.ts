/**
 * The trust boundary end to end (issue 11, DESIGN.md §10): a repository whose git configuration,
 * attributes and hooks run commands, and whose config carries credentials, goes through every
 * command that handles it on the host — seeding (`run`), `diff`, `apply`, `fix-tests` — and not
 * one of its commands runs on the host, and none of its credentials reaches the sandbox.
 */
import { chmod, cp, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";

import { demoRepo, example, git } from "../support/demo-repo.js";
import { removeContainersOfHome, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

const canary = "ghp_canary0token0in0remote";

/** Makes `repo` hostile: every way git lets a repository run a command writes a marker file. */
async function armRepository(repo: string, markers: string): Promise<void> {
  const touch = (name: string): string => `touch ${path.join(markers, name)}`;
  const hook = async (file: string, name: string): Promise<void> => {
    await writeFile(file, `#!/bin/sh\n${touch(name)}\n`);
    await chmod(file, 0o755);
  };
  const hooks = path.join(repo, ".git", "hooks");
  for (const name of [
    "post-index-change",
    "reference-transaction",
    "pre-commit",
    "post-checkout",
    "pre-auto-gc",
  ]) {
    await hook(path.join(hooks, name), `hook-${name}`);
  }
  const hooksPath = path.join(path.dirname(repo), "hooks-elsewhere");
  await mkdir(hooksPath);
  await hook(path.join(hooksPath, "post-index-change"), "hooks-path");
  const fsmonitor = path.join(path.dirname(repo), "fsmonitor.sh");
  await hook(fsmonitor, "fsmonitor");
  const config = (key: string, value: string): string => git(repo, "config", key, value);
  config("filter.x.clean", `${touch("filter-clean")}; cat`);
  config("filter.x.smudge", `${touch("filter-smudge")}; cat`);
  config("diff.x.textconv", `sh -c '${touch("textconv")}; cat "$0"'`);
  config("diff.external", `sh -c '${touch("external-diff")}'`);
  config("core.fsmonitor", fsmonitor);
  config("core.hooksPath", hooksPath);
  config("remote.origin.url", `https://ci:${canary}@github.com/acme/shop.git`);
  config("http.https://github.com/.extraheader", `AUTHORIZATION: basic ${canary}`);
  config("credential.helper", `store --file ${path.join(markers, "..", "creds")}`);
  await writeFile(path.join(repo, ".gitattributes"), "*.py filter=x diff=x\n");
  // Committed the plain way (hooks and filters off), so the attack is armed, not yet fired.
  git(repo, "-c", "core.hooksPath=/dev/null", "add", ".gitattributes");
  git(repo, "-c", "core.hooksPath=/dev/null", "commit", "-qm", "attributes");
}

async function firedMarkers(markers: string): Promise<string[]> {
  return (await readdir(markers)).sort();
}

describe("a hostile repository runs nothing on the host", () => {
  let root: string;
  let home: string;
  let repo: string;
  let markers: string;
  const env = (): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    ANTHROPIC_API_KEY: "",
  });

  beforeAll(async () => {
    await requireSandboxImage();
    repo = await demoRepo();
    root = path.dirname(repo);
    home = await mkdtemp(path.join(tmpdir(), "cordon-hostile-home-"));
    markers = path.join(root, "markers");
    await mkdir(markers);
    await armRepository(repo, markers);
  });

  beforeEach(async () => {
    for (const name of await readdir(markers)) await rm(path.join(markers, name));
  });

  afterAll(async () => {
    // By this home's label, not by name: another file's containers may be running beside this one.
    await removeContainersOfHome(home);
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
  });

  it("the attack is real: plain git in a copy of the repository fires it", async () => {
    const copy = path.join(root, "plain-copy");
    await cp(repo, copy, { recursive: true });
    try {
      await writeFile(path.join(copy, "pricing.py"), "# changed\n", { flag: "a" });
      git(copy, "status", "--porcelain");
      git(copy, "add", "-A");
      git(copy, "diff", "--cached", "--stat");
      expect(await firedMarkers(markers)).toEqual(
        expect.arrayContaining(["filter-clean", "fsmonitor", "hooks-path"]),
      );
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });

  it("fix-tests: seeding, the agent's run, taking the patch and verifying it fire nothing", async () => {
    const out = path.join(root, "fix-tests-out");
    const run = await runCordon(
      [
        "fix-tests",
        "--workspace",
        repo,
        "--test-cmd",
        "python3 -m unittest -v",
        "--out",
        out,
        "--model-script",
        example("demo", "script.json"),
      ],
      env(),
    );
    expect(run.exitCode, run.stderr).toBe(0);
    expect(await firedMarkers(markers)).toEqual([]);
  });

  it("run, diff and apply fire nothing, and the repository's credentials stay out of the sandbox", async () => {
    const session = ["--workspace", repo, "--session", "hostile"];
    const run = await runCordon(
      ["run", ...session, "--model-script", example("demo", "script.json"), "Fix the test."],
      env(),
    );
    expect(run.exitCode, run.stderr).toBe(0);
    expect(await firedMarkers(markers)).toEqual([]);

    const search = await runCordon(
      ["exec", ...session, "--", "sh", "-c", `grep -r -l ${canary} /workspace/.git; true`],
      env(),
    );
    expect(search.exitCode).toBe(0);
    expect(search.stdout).toBe("");
    const config = await runCordon(["exec", ...session, "--", "git", "config", "--list"], env());
    expect(config.stdout).not.toMatch(/extraheader|credential|fsmonitor|hookspath|filter\./i);

    const diff = await runCordon(["diff", ...session], env());
    expect(diff.exitCode, diff.stderr).toBe(0);
    expect(diff.stdout).toContain("+    return subtotal - discount");
    expect(await firedMarkers(markers)).toEqual([]);

    const apply = await runCordon(["apply", ...session], env());
    expect(apply.exitCode, apply.stderr).toBe(0);
    // Read back without git: git in the real repository would fire its own filter.
    expect(await readFile(path.join(repo, "pricing.py"), "utf8")).toContain(
      "return subtotal - discount",
    );
    expect(await firedMarkers(markers)).toEqual([]);
  });
});
