import { execFileSync } from "node:child_process";
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { parsePatch } from "../../changes/index.js";
import { HostSandbox } from "../../sandbox/host/host-sandbox.js";
import { applyWithBaseHarness } from "./restore.js";

/**
 * restore.ts on a real git tree (a host sandbox stands in for the verify container): the patch is
 * made by git from real edits, applied by git, and what comes back is read from the disk.
 */
describe("applyWithBaseHarness", { timeout: 60_000 }, () => {
  let base: string;
  let root: string;
  let sandbox: HostSandbox;
  const git = (...args: string[]): string =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.invalid", ...args], {
      cwd: root,
      encoding: "utf8",
      env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null" },
    });

  beforeEach(async () => {
    base = await mkdtemp(path.join(tmpdir(), "cordon-restore-test-"));
    root = path.join(base, "repo");
    execFileSync("git", ["init", "-q", root]);
    await writeFile(path.join(root, "Makefile"), "test:\n\tpython3 -m unittest\n");
    await writeFile(path.join(root, "run-tests.sh"), "#!/bin/sh\nexec python3 -m unittest\n");
    await chmod(path.join(root, "run-tests.sh"), 0o755);
    await writeFile(path.join(root, "test_calc.py"), "import unittest\n");
    await writeFile(path.join(root, "calc.py"), "def add(a, b):\n    return a - b\n");
    await writeFile(
      path.join(root, "package.json"),
      `${JSON.stringify({ name: "calc", scripts: { test: "make test" } }, null, 2)}\n`,
    );
    git("add", "-A");
    git("commit", "-qm", "base");
    sandbox = await HostSandbox.create({ root, stateDirectory: path.join(base, "state") });
  });

  afterEach(async () => {
    await rm(base, { recursive: true, force: true });
  });

  /** The patch of the working tree's edits; the tree is reset to the base before it returns. */
  async function patchOf(edit: () => Promise<void>): Promise<{ file: string; patch: Buffer }> {
    await edit();
    git("add", "-A");
    const patch = execFileSync("git", ["diff", "--cached", "--binary", "--full-index"], {
      cwd: root,
    });
    git("reset", "-q", "--hard");
    git("clean", "-qfd");
    const file = path.join(base, "changes.patch");
    await writeFile(file, patch);
    return { file, patch };
  }

  const apply = (file: string) => () =>
    sandbox.exec(`git apply --binary ${file} 2>&1`, { timeoutMs: 30_000 });

  it("puts back the harness files git writes even when the parsed list misses them", async () => {
    const { file } = await patchOf(async () => {
      await writeFile(path.join(root, "Makefile"), "test:\n\t@echo 'all tests passed'\n");
      await writeFile(path.join(root, "run-tests.sh"), "#!/bin/sh\nexit 0\n");
      await writeFile(path.join(root, "unittest.py"), "import sys\nsys.exit(0)\n");
      await writeFile(path.join(root, "calc.py"), "def add(a, b):\n    return a + b\n");
    });
    // As if the parser had been fooled: it names no file at all.
    const outcome = await applyWithBaseHarness(sandbox, file, apply(file), {
      files: [],
      rules: { testCommand: "./run-tests.sh" },
      allowTestChanges: false,
    });
    expect(outcome.applied.exitCode).toBe(0);
    expect(outcome.restored).toEqual(["Makefile", "run-tests.sh", "unittest.py"]);
    expect(await readFile(path.join(root, "Makefile"), "utf8")).toContain("python3 -m unittest");
    expect(await readFile(path.join(root, "run-tests.sh"), "utf8")).toContain("exec python3");
    expect((await stat(path.join(root, "run-tests.sh"))).mode & 0o777).toBe(0o755);
    await expect(stat(path.join(root, "unittest.py"))).rejects.toThrow();
    // The code change stays: it is what verification is for.
    expect(await readFile(path.join(root, "calc.py"), "utf8")).toContain("a + b");
  });

  it("with test changes allowed, a test edit stays but package.json's scripts go back", async () => {
    const { file, patch } = await patchOf(async () => {
      await writeFile(path.join(root, "test_calc.py"), "import unittest  # fixed expectation\n");
      await writeFile(
        path.join(root, "package.json"),
        `${JSON.stringify({ name: "calc", scripts: { test: "exit 0" } }, null, 2)}\n`,
      );
    });
    const outcome = await applyWithBaseHarness(sandbox, file, apply(file), {
      files: parsePatch(patch),
      rules: { testCommand: "npm test" },
      allowTestChanges: true,
    });
    expect([...outcome.harnessChanges]).toEqual([["package.json", ["scripts.test"]]]);
    expect(outcome.restored).toEqual(["package.json"]);
    expect(await readFile(path.join(root, "package.json"), "utf8")).toContain('"make test"');
    expect(await readFile(path.join(root, "test_calc.py"), "utf8")).toContain("fixed expectation");
  });

  it("a patch git refuses changes nothing and restores nothing", async () => {
    await writeFile(path.join(base, "bad.patch"), "not a patch\n");
    const bad = path.join(base, "bad.patch");
    const outcome = await applyWithBaseHarness(sandbox, bad, apply(bad), {
      files: [],
      rules: { testCommand: "make test" },
      allowTestChanges: false,
    });
    expect(outcome.applied.exitCode).not.toBe(0);
    expect(outcome.restored).toEqual([]);
  });
});
