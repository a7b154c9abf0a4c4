/**
 * `cordon fix-tests` on the project kinds of issue 25, in a project image with Debian's Go, bats
 * and CMake (test/fixtures/fix-tests/{go-calc,bats-shim,semver-cmake}/.cordon/Dockerfile, one
 * image for all three): a Go module whose `go test ./...` builds and runs its test binaries under
 * /tmp (exec allowed), counted without -v by its packages; a bats suite whose failing test's
 * report says "rbenv: rspec: command not found" as its expected output, which is not a missing
 * command; a CMake project building into a directory no .gitignore names, whose second build
 * writes files (compiler_depend.internal, under _build/tests/) the first did not.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { fixture, git, repositoryOf } from "../support/demo-repo.js";
import { removeFixTestsContainers, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

interface ResultJson {
  status: string;
  exitCode: number;
  message: string;
  sessionKey: string;
  filesChanged: { path: string }[];
  protectedFiles: string[];
  environment?: unknown;
  testCount?: { status: string; before?: number; after?: number; message: string };
  testCommandOutputs: string[];
  durationsMs: Record<string, number>;
}

type Block = Record<string, unknown>;
const edit = (file: string, oldText: string, newText: string): Block => ({
  type: "tool_use",
  name: "edit",
  input: { path: file, old_text: oldText, new_text: newText },
});
const exec = (command: string): Block => ({ type: "tool_use", name: "exec", input: { command } });

function script(...turns: Block[][]): unknown {
  return {
    version: 1,
    model: "scripted-fixer",
    turns: [
      ...turns.map((content) => ({ content })),
      { content: [{ type: "text", text: "Done." }] },
    ],
  };
}

/**
 * Each test's limit: whichever runs first builds the project image (Go, bats and CMake from
 * Debian's mirror), which takes minutes on a loaded machine.
 */
const firstBuildTimeoutMs = 300_000;

describe("cordon fix-tests on a Go module, a bats suite and a CMake project", () => {
  let home: string;
  let config: string;
  const repos: string[] = [];
  const sessions: string[] = [];

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-real-projects-"));
    // Named by CORDON_CONFIG: the user's own config, so the project's Dockerfile is trusted.
    config = path.join(home, "cordon.json5");
    await writeFile(
      config,
      '{ agents: { defaults: { sandbox: { docker: { dockerfile: ".cordon/Dockerfile" } } } } }\n',
    );
  });

  afterAll(async () => {
    await removeFixTestsContainers(sessions);
    await removeStateDirectory(home);
    for (const repo of repos) await rm(path.dirname(repo), { recursive: true, force: true });
  });

  async function fixTests(name: string, fixtureName: string, testCommand: string, agent: unknown) {
    const repo = await repositoryOf(fixture("fix-tests", fixtureName));
    repos.push(repo);
    const out = path.join(home, name);
    const scriptFile = path.join(home, `${name}.script.json`);
    await writeFile(scriptFile, JSON.stringify(agent));
    const run = await runCordon(
      [
        "fix-tests",
        "--workspace",
        repo,
        "--test-cmd",
        testCommand,
        "--out",
        out,
        "--model-script",
        scriptFile,
      ],
      { CORDON_HOME: home, CORDON_CONFIG: config, ANTHROPIC_API_KEY: "" },
    );
    const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as ResultJson;
    sessions.push(result.sessionKey);
    expect(git(repo, "status", "--porcelain")).toBe("");
    return {
      run,
      result,
      summary: await readFile(path.join(out, "summary.md"), "utf8"),
      patch: await readFile(path.join(out, "changes.patch"), "utf8"),
    };
  }

  it(
    "a Go module: go test ./... runs from /tmp, the fix is verified, packages counted: exit 0",
    async () => {
      const { run, result, summary } = await fixTests(
        "go",
        "go-calc",
        "go test ./...",
        script(
          [
            edit(
              "calc/calc.go",
              "return float64(total / len(xs))",
              "return float64(total) / float64(len(xs))",
            ),
          ],
          [exec("go test ./...")],
        ),
      );
      expect(run.exitCode, run.stderr).toBe(0);
      expect(result).toMatchObject({ status: "fixed", filesChanged: [{ path: "calc/calc.go" }] });
      expect(result.testCount).toMatchObject({ status: "kept", before: 2, after: 2 });
      expect(result.testCount?.message).toMatch(/2 packages before, 2 after; .*-v or -json/);
      expect(summary).toContain("2 package(s) ran their tests (go test (packages))");
    },
    firstBuildTimeoutMs,
  );

  it(
    "bats: an expected 'command not found' in a failing test's report is not a missing tool; the fix is verified: exit 0",
    async () => {
      const { run, result } = await fixTests(
        "bats",
        "bats-shim",
        "bats test",
        script([
          edit(
            "shim.sh",
            'echo "rbenv $1: command not found"',
            'echo "rbenv: $1: command not found"',
          ),
        ]),
      );
      expect(result.environment).toBeUndefined();
      expect(run.exitCode, run.stderr).toBe(0);
      expect(result).toMatchObject({ status: "fixed", filesChanged: [{ path: "shim.sh" }] });
      expect(result.testCount).toMatchObject({ status: "kept", before: 2, after: 2 });
    },
    firstBuildTimeoutMs,
  );

  it(
    "bats: an agent that skips the failing test gets exit 8 naming the test file",
    async () => {
      const { run, result } = await fixTests(
        "bats-skip",
        "bats-shim",
        "bats test",
        script([
          edit(
            "test/shim.bats",
            "  run -127 ./shim.sh rspec",
            '  skip "flaky"\n  run -127 ./shim.sh rspec',
          ),
        ]),
      );
      expect(run.exitCode).toBe(8);
      expect(result).toMatchObject({
        status: "protected_files_changed",
        protectedFiles: ["test/shim.bats"],
      });
      expect(result.message).toContain("test/shim.bats");
    },
    firstBuildTimeoutMs,
  );

  it(
    "CMake into a non-ignored _build: what the agent's rebuild writes there is no test edit; the patch is the source file only, exit 0",
    async () => {
      const build =
        "cmake -B _build && cmake --build _build && ctest --test-dir _build --output-on-failure";
      const { run, result, summary, patch } = await fixTests(
        "cmake",
        "semver-cmake",
        build,
        script(
          [
            edit(
              "src/semver.c",
              "static int compare_prerelease(const char *a, const char *b)\n{\n",
              "static int compare_prerelease(const char *a, const char *b)\n{\n    /* A release outranks its own pre-releases: 1.0.0-rc.1 < 1.0.0. */\n    if (*a == '\\0' || *b == '\\0')\n        return (*a == '\\0') - (*b == '\\0');\n",
            ),
          ],
          // The agent's own run is the project's second build: CMake writes
          // CMakeFiles/*/compiler_depend.internal now, not in the run before the agent.
          [exec(build)],
        ),
      );
      expect(run.exitCode, run.stderr).toBe(0);
      expect(result).toMatchObject({
        status: "fixed",
        filesChanged: [{ path: "src/semver.c" }],
        protectedFiles: [],
        testCommandOutputs: ["_build/"],
      });
      expect(result.testCount).toMatchObject({ status: "kept", before: 3, after: 3 });
      expect(patch).not.toContain("_build");
      expect(summary).toContain(
        "Left out of the patch, written by the test command itself: `_build/`",
      );
    },
    firstBuildTimeoutMs,
  );

  it(
    "CMake: an agent that turns the tests off (ctest then passes with none) gets exit 8 naming CMakeLists.txt",
    async () => {
      const { run, result } = await fixTests(
        "cmake-off",
        "semver-cmake",
        "cmake -B _build && cmake --build _build && ctest --test-dir _build",
        script([
          edit(
            "CMakeLists.txt",
            'option(SEMVER_BUILD_TESTS "Build the semver tests" ON)',
            'option(SEMVER_BUILD_TESTS "Build the semver tests" OFF)',
          ),
        ]),
      );
      expect(run.exitCode).toBe(8);
      expect(result).toMatchObject({
        status: "protected_files_changed",
        protectedFiles: ["CMakeLists.txt"],
      });
    },
    firstBuildTimeoutMs,
  );
});
