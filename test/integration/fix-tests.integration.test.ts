/**
 * `cordon fix-tests` end to end on a real repository with a real failing test, in real
 * containers: a fix that verifies (0), a "fix" that edits the test (8, naming it, also when hidden
 * behind a spoofed header line), a "fix" that deletes the failing test (8, the count dropped), an agent out of
 * turns (5, partial artifacts), tests already passing (0, nothing changed).
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { demoRepo, example, fixture, git, repositoryOf } from "../support/demo-repo.js";
import { dockerClient, removeContainersOfHome, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

interface ResultJson {
  status: string;
  exitCode: number;
  sessionKey: string;
  filesChanged: { path: string }[];
  protectedFiles: string[];
  agent?: { status: string; turns: number; model?: string };
  durationMs: number;
  cost: { usd: number | null; reason?: string };
  verification?: { exitCode: number };
  testCount?: { status: string; before?: number; after?: number; message: string };
  binaryFiles: string[];
  testCommandOutputs: string[];
  testCommandRanTwice: boolean;
}

describe("cordon fix-tests", () => {
  let home: string;
  let repo: string;
  const env = (): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    ANTHROPIC_API_KEY: "",
  });

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-fix-home-"));
    repo = await demoRepo();
  });

  afterAll(async () => {
    // Every fix-tests session has its own containers; remove them by this home's label (not by
    // name: another file's fix-tests containers may be running beside this one).
    await removeContainersOfHome(home);
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  const fixTests = (script: string, out: string, ...extra: string[]) =>
    fixTestsWith("python3 -m unittest -v", script, out, ...extra);

  async function fixTestsWith(testCmd: string, script: string, out: string, ...extra: string[]) {
    return fixTestsIn(repo, testCmd, script, out, ...extra);
  }

  async function fixTestsIn(
    workspace: string,
    testCmd: string,
    script: string,
    out: string,
    ...extra: string[]
  ) {
    const run = await runCordon(
      [
        "fix-tests",
        "--workspace",
        workspace,
        "--test-cmd",
        testCmd,
        "--out",
        out,
        "--model-script",
        script,
        ...extra,
      ],
      env(),
    );
    const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as ResultJson;
    return { run, result };
  }

  it("a fix that makes the tests pass is verified on a clean copy: exit 0 and every artifact", async () => {
    const out = path.join(home, "fixed");
    const { run, result } = await fixTests(example("demo", "script.json"), out);
    expect(run.exitCode).toBe(0);
    expect(result).toMatchObject({ status: "fixed", exitCode: 0, verification: { exitCode: 0 } });
    expect(result.filesChanged.map((file) => file.path)).toEqual(["pricing.py"]);
    // The model that answered (the script's), the job's time, and no made-up price for it.
    expect(result.agent?.model).toBe("scripted-demo");
    expect(result.durationMs).toBeGreaterThan(0);
    expect(result.cost).toEqual({
      usd: null,
      reason: expect.stringContaining('no price for "scripted-demo"') as string,
    });
    // unittest ran the three tests before the agent (one failing) and the same three after.
    expect(result.testCount).toEqual({
      status: "kept",
      before: 3,
      after: 3,
      message: "3 tests before, 3 after",
    });
    const patch = await readFile(path.join(out, "changes.patch"), "utf8");
    expect(patch).toContain("+    return subtotal - discount");
    const transcript = (await readFile(path.join(out, "transcript.jsonl"), "utf8"))
      .trim()
      .split("\n");
    expect(transcript.length).toBeGreaterThanOrEqual(10);
    expect(await readFile(path.join(out, "summary.md"), "utf8")).toContain("Fixed and verified");
    // The user's repository is untouched, and the run left no container behind.
    expect(git(repo, "status", "--porcelain")).toBe("");
    const left = await dockerClient().listContainers({
      all: true,
      filters: { label: [`cordon.session=${result.sessionKey}`] },
    });
    expect(left).toEqual([]);
  });

  it("a patch that edits the test instead fails verification with exit 8, naming the file", async () => {
    const out = path.join(home, "cheat");
    const { run, result } = await fixTests(fixture("fix-tests", "edits-the-test.json"), out);
    expect(run.exitCode).toBe(8);
    expect(result).toMatchObject({
      status: "protected_files_changed",
      protectedFiles: ["test_pricing.py"],
    });
    expect(run.stdout).toContain("test_pricing.py");
    expect(await readFile(path.join(out, "changes.patch"), "utf8")).toContain("2200");
  });

  it("a test edit hidden behind a `++ b/pricing.py` content line is still caught (exit 8)", async () => {
    // A line scanner reads the added line `++ b/pricing.py` (`+++ b/pricing.py` in the patch) as
    // the file's header, sees only pricing.py changed, and verifies the cheat as a fix.
    const out = path.join(home, "spoof");
    const { run, result } = await fixTests(fixture("fix-tests", "spoofs-the-header.json"), out);
    expect(await readFile(path.join(out, "changes.patch"), "utf8")).toContain(
      "\n+++ b/pricing.py\n",
    );
    expect(run.exitCode).toBe(8);
    expect(result).toMatchObject({
      status: "protected_files_changed",
      protectedFiles: ["test_pricing.py"],
    });
    expect(result.filesChanged.map((file) => file.path)).toEqual(["test_pricing.py"]);
  });

  it("a patch that deletes the failing test is caught by the count: exit 8 naming the drop", async () => {
    // Test changes are allowed here, so only the count stands between this and "Fixed".
    const out = path.join(home, "deletes");
    const { run, result } = await fixTests(
      fixture("fix-tests", "deletes-a-test.json"),
      out,
      "--allow-test-changes",
    );
    expect(run.exitCode).toBe(8);
    expect(result).toMatchObject({
      status: "verification_failed",
      verification: { exitCode: 0 },
      testCount: { status: "dropped", before: 3, after: 2 },
    });
    expect(run.stdout).toContain("3 tests before, 2 after");
    expect(await readFile(path.join(out, "summary.md"), "utf8")).toContain(
      "3 tests before, 2 after",
    );
  });

  it("what the test command builds (byte-compiled modules) stays out of the patch: exit 0", async () => {
    // The test command writes __pycache__/*.pyc (binary) before the agent and again after its fix;
    // __pycache__ is a directory it created, so all of it is its output, and nothing outside it
    // was written: no second run.
    const out = path.join(home, "builds");
    const { run, result } = await fixTestsWith(
      "python3 -m compileall -q . && python3 -m unittest -v",
      fixture("fix-tests", "fixes-and-builds.json"),
      out,
    );
    expect(run.exitCode).toBe(0);
    expect(result).toMatchObject({ status: "fixed", binaryFiles: [] });
    expect(result).toMatchObject({
      testCommandOutputs: ["__pycache__/"],
      testCommandRanTwice: false,
    });
    expect(result.filesChanged.map((file) => file.path)).toEqual(["pricing.py"]);
    const patch = await readFile(path.join(out, "changes.patch"), "utf8");
    expect(patch).not.toContain("__pycache__");
    expect(await readFile(path.join(out, "summary.md"), "utf8")).toContain(
      "written by the test command itself: `__pycache__/`.",
    );
  });

  it("a `make test` project that ignores nothing: its test binary stays out of the patch, exit 0", async () => {
    // The C project of the harness tests without its .gitignore: `make test` writes test_calc
    // (an executable) into the tree before the agent and again after the fix. A file outside any
    // directory it created: it runs a second time before the agent, which rebuilds nothing.
    const make = await repositoryOf(fixture("fix-tests", "calc-make"));
    try {
      git(make, "rm", "-q", ".gitignore");
      git(make, "commit", "-qm", "no ignores");
      const out = path.join(home, "make");
      const { run, result } = await fixTestsIn(
        make,
        "make test",
        fixture("fix-tests", "fixes-clamp.json"),
        out,
      );
      expect(run.exitCode).toBe(0);
      expect(result).toMatchObject({
        status: "fixed",
        testCommandOutputs: ["test_calc"],
        testCommandRanTwice: true,
        binaryFiles: [],
      });
      expect(result.filesChanged.map((file) => file.path)).toEqual(["calc.c"]);
      // Its own checker prints "5 checks, 0 failures": no runner summary, and that is said.
      expect(result.testCount).toMatchObject({ status: "not_checked" });
      expect(run.stdout).toContain("test count not checked");
      const summary = await readFile(path.join(out, "summary.md"), "utf8");
      expect(summary).toContain("⚠️ test count not checked");
      expect(summary).toContain(
        "Left out of the patch, written by the test command itself (it ran twice before the agent, to see what a rebuild writes too): `test_calc`",
      );
    } finally {
      await rm(path.dirname(make), { recursive: true, force: true });
    }
  });

  it("a test binary already built in the user's tree, rebuilt after the fix, is not the agent's: exit 0", async () => {
    // The case: test_calc was built (from the buggy calc.c) before cordon ran, so the
    // run before the agent finds it up to date and rewrites nothing; after the fix make rebuilds
    // it, and it reads as a binary change of the agent's. Verified without it, the verification
    // run rebuilds it: the test command's output, left out.
    const make = await repositoryOf(fixture("fix-tests", "calc-make"));
    try {
      git(make, "rm", "-q", ".gitignore");
      git(make, "commit", "-qm", "no ignores");
      const image = await requireSandboxImage();
      execFileSync("docker", [
        "run",
        "--rm",
        "--user",
        "0",
        "-v",
        `${make}:/w`,
        "-w",
        "/w",
        image,
        "make",
        "test_calc",
      ]);
      const out = path.join(home, "prebuilt");
      const { run, result } = await fixTestsIn(
        make,
        "make test",
        fixture("fix-tests", "fixes-clamp.json"),
        out,
      );
      expect(run.exitCode).toBe(0);
      expect(result).toMatchObject({
        status: "fixed",
        binaryFiles: [],
        testCommandOutputs: ["test_calc"],
      });
      expect(result.filesChanged.map((file) => file.path)).toEqual(["calc.c"]);
      expect(await readFile(path.join(out, "changes.patch"), "utf8")).not.toContain("test_calc");
    } finally {
      await rm(path.dirname(make), { recursive: true, force: true });
    }
  });

  it("a binary file the agent added is refused (exit 8, named) unless --allow-binary", async () => {
    const refused = await fixTests(
      fixture("fix-tests", "adds-a-binary.json"),
      path.join(home, "binary"),
    );
    expect(refused.run.exitCode).toBe(8);
    expect(refused.result).toMatchObject({
      status: "binary_files_changed",
      binaryFiles: ["rates.bin"],
    });
    expect(refused.run.stdout).toContain("rates.bin");
    expect(refused.run.stdout).toContain("--allow-binary");

    const allowed = await fixTests(
      fixture("fix-tests", "adds-a-binary.json"),
      path.join(home, "binary-allowed"),
      "--allow-binary",
    );
    expect(allowed.run.exitCode).toBe(0);
    expect(allowed.result).toMatchObject({ status: "fixed", binaryFiles: ["rates.bin"] });
  });

  it("an agent that runs out of turns exits 5 with partial artifacts", async () => {
    const out = path.join(home, "turns");
    const { run, result } = await fixTests(
      example("demo", "script.json"),
      out,
      "--max-turns",
      "2",
      "--keep-sandboxes",
    );
    expect(run.exitCode).toBe(5);
    // Kept on request (and so the label filter of the first test is known to find containers).
    const kept = await dockerClient().listContainers({
      all: true,
      filters: { label: [`cordon.session=${result.sessionKey}`] },
    });
    expect(kept).toHaveLength(1);
    expect(result).toMatchObject({
      status: "agent_stopped",
      agent: { status: "limit_turns", turns: 2 },
    });
    for (const name of ["changes.patch", "transcript.jsonl", "summary.md"]) {
      await expect(readFile(path.join(out, name))).resolves.toBeDefined();
    }
  });

  it("tests that already pass: exit 0, the agent is never called, nothing changes", async () => {
    await writeFile(
      path.join(repo, "pricing.py"),
      (await readFile(path.join(repo, "pricing.py"), "utf8")).replace(
        "subtotal + discount",
        "subtotal - discount",
      ),
    );
    git(repo, "commit", "-qam", "fixed by hand");
    const out = path.join(home, "passing");
    const { run, result } = await fixTests(fixture("fix-tests", "no-turns.json"), out);
    expect(run.exitCode).toBe(0);
    expect(result).toMatchObject({ status: "already_passing", filesChanged: [] });
    expect(result.agent).toBeUndefined();
    git(repo, "reset", "-q", "--hard", "HEAD~1");
  });
});
