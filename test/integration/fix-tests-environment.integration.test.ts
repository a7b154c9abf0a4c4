/**
 * `cordon fix-tests` on real projects in the default image, and on the same kind of projects
 * whose tests cannot run in the sandbox. A pytest project and a Makefile C project are fixed by a
 * scripted agent and verified (exit 0). A pytest project that needs PyYAML (not installed) and a
 * `make memcheck` that needs valgrind (not in the image) end at once with exit 9 and a message
 * naming the fix, before any model call: the model is a real Messages API server that records
 * every request, and it gets none. An agent that changes nothing is not "verified".
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { fixture, git, repositoryOf } from "../support/demo-repo.js";
import { removeFixTestsContainers, requireSandboxImage } from "../support/docker.js";
import { startMessagesApiServer, type MessagesApiServer } from "../support/messages-api-server.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

interface ResultJson {
  status: string;
  exitCode: number;
  message: string;
  sessionKey: string;
  filesChanged: { path: string }[];
  agent?: unknown;
  environment?: { kind: string; evidence: string; fix: string };
  verification?: { exitCode: number };
  testCount?: { status: string; before?: number; after?: number };
}

type Block = Record<string, unknown>;
const edit = (file: string, oldText: string, newText: string): Block => ({
  type: "tool_use",
  name: "edit",
  input: { path: file, old_text: oldText, new_text: newText },
});
const exec = (command: string): Block => ({ type: "tool_use", name: "exec", input: { command } });

/** A scripted agent: each argument is one turn's blocks, then a closing text turn. */
function script(...turns: Block[][]): unknown {
  return {
    version: 1,
    model: "scripted-fixer",
    turns: [
      ...turns.map((content) => ({ content })),
      { content: [{ type: "text", text: "Fixed the off-by-one; the tests pass." }] },
    ],
  };
}

describe("cordon fix-tests on real projects in the default image", () => {
  let home: string;
  let server: MessagesApiServer;
  const repos: string[] = [];
  const sessions: string[] = [];

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-env-home-"));
    server = await startMessagesApiServer();
  });

  afterAll(async () => {
    await server.close();
    await removeFixTestsContainers(sessions);
    await removeStateDirectory(home);
    for (const repo of repos) await rm(path.dirname(repo), { recursive: true, force: true });
  });

  async function repository(name: string): Promise<string> {
    const repo = await repositoryOf(fixture("fix-tests", name));
    repos.push(repo);
    return repo;
  }

  /** fix-tests with a scripted agent, or (agent undefined) against the recording API server. */
  async function fixTests(name: string, repo: string, testCommand: string, agent?: unknown) {
    const out = path.join(home, name);
    const model: string[] = [];
    if (agent !== undefined) {
      const scriptFile = path.join(home, `${name}.script.json`);
      await writeFile(scriptFile, JSON.stringify(agent));
      model.push("--model-script", scriptFile);
    }
    const run = await runCordon(
      ["fix-tests", "--workspace", repo, "--test-cmd", testCommand, "--out", out, ...model],
      {
        CORDON_HOME: home,
        CORDON_CONFIG: "",
        ANTHROPIC_API_KEY: agent === undefined ? "sk-test-recorded" : "",
        ANTHROPIC_BASE_URL: agent === undefined ? server.url : "",
      },
    );
    const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as ResultJson;
    sessions.push(result.sessionKey);
    expect(git(repo, "status", "--porcelain")).toBe("");
    const summary = await readFile(path.join(out, "summary.md"), "utf8");
    return { run, result, summary };
  }

  it("a pytest project: the agent's fix is verified with pytest on a clean copy (exit 0)", async () => {
    const repo = await repository("warehouse-pytest");
    const { run, result } = await fixTests(
      "pytest-fixed",
      repo,
      "pytest -q",
      script([edit("inventory.py", "if quantity >= available:", "if quantity > available:")]),
    );
    expect(run.stderr).not.toMatch(/not found|No module named/);
    expect(run.exitCode).toBe(0);
    expect(result).toMatchObject({ status: "fixed", verification: { exitCode: 0 } });
    expect(result.filesChanged.map((file) => file.path)).toEqual(["inventory.py"]);
    expect(result.testCount).toMatchObject({ status: "kept", before: 6, after: 6 });
  });

  it("a Makefile C project: make builds with gcc and the fix is verified by `make test` (exit 0)", async () => {
    const repo = await repository("textbuf-make");
    const { run, result } = await fixTests(
      "make-fixed",
      repo,
      "make test",
      script(
        [exec("make test 2>&1 | tail -3")],
        [
          edit(
            "textbuf.c",
            "            words++;\n            in_word = 1;",
            "            if (!in_word) words++;\n            in_word = 1;",
          ),
        ],
      ),
    );
    expect(run.exitCode).toBe(0);
    expect(result).toMatchObject({ status: "fixed", verification: { exitCode: 0 } });
    expect(result.filesChanged.map((file) => file.path)).toEqual(["textbuf.c"]);
  });

  it("a pytest project whose dependency is not installed: exit 9 naming the module and the fix, no model call", async () => {
    const repo = await repository("rates-pytest");
    const before = server.requests.length;
    const { run, result, summary } = await fixTests("pytest-no-yaml", repo, "pytest -q");
    expect(run.exitCode).toBe(9);
    expect(result).toMatchObject({
      status: "environment_error",
      exitCode: 9,
      environment: { kind: "module_not_found" },
    });
    expect(result.environment?.evidence).toContain("No module named 'yaml'");
    expect(result.message).toMatch(/the Python module `yaml` is not installed/);
    expect(result.message).toMatch(/--carry \.venv.*--setup-cmd/);
    expect(result.agent).toBeUndefined();
    expect(result.verification).toBeUndefined();
    expect(summary).toMatch(/environment, not code/);
    expect(server.requests.length).toBe(before);
  });

  it("a Makefile target that needs a tool the image lacks (valgrind): exit 9, no model call", async () => {
    const repo = await repository("textbuf-make");
    const before = server.requests.length;
    const { run, result } = await fixTests("make-no-valgrind", repo, "make memcheck");
    expect(run.exitCode).toBe(9);
    expect(result).toMatchObject({
      status: "environment_error",
      environment: { kind: "command_not_found" },
    });
    expect(result.message).toMatch(/sandbox\.docker\.image|sandbox\.docker\.dockerfile/);
    expect(run.stdout + run.stderr).toMatch(/cannot run in the sandbox/);
    expect(server.requests.length).toBe(before);
  });

  it("verification that fails as the run before the agent did, before any test ran: exit 9, likely the environment", async () => {
    // A failure no pattern knows, before pytest starts: what a service or tool the tests need
    // looks like when the sandbox lacks it. The agent's fix of inventory.py cannot change it.
    const repo = await repository("warehouse-pytest");
    const { run, result, summary } = await fixTests(
      "same-failure",
      repo,
      "python3 -c 'import sys; sys.exit(\"fatal: no test database at /run/testdb.sock\")' && pytest -q",
      script([edit("inventory.py", "if quantity >= available:", "if quantity > available:")]),
    );
    expect(run.exitCode).toBe(9);
    expect(result).toMatchObject({
      status: "same_failure",
      exitCode: 9,
      verification: { exitCode: 1 },
      filesChanged: [{ path: "inventory.py" }],
    });
    expect(result.agent).toBeDefined();
    expect(result.message).toMatch(/^The same failure as before the agent: likely the environment/);
    expect(result.message).toMatch(/Fix: .*cordon exec/);
    expect(summary).toMatch(/likely the environment/);
  });

  it("an agent that changes nothing is not verified: exit 8 and the result says verification was skipped", async () => {
    const repo = await repository("warehouse-pytest");
    const { run, result } = await fixTests("pytest-nothing", repo, "pytest -q", script());
    expect(run.exitCode).toBe(8);
    expect(result).toMatchObject({ status: "no_changes", filesChanged: [] });
    expect(result.verification).toBeUndefined();
    expect(result.message).toMatch(/made no changes, so verification was skipped/);
  });
});
