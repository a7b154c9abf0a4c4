/**
 * The whole job end to end: `cordon run` plans the run, acquires a real container, offers the
 * tools, drives a model (scripted, or the real SDK against a local Messages API server), persists
 * the session, and ends with the right exit code; `diff` and `apply` round-trip the changes.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createRunner } from "../../src/runner/index.js";
import { demoRepo, example, git } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { startMessagesApiServer, type MessagesApiServer } from "../support/messages-api-server.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

const suffix = `${process.pid}-${Date.now().toString(36)}`;

describe("cordon run, end to end", () => {
  let home: string;
  let repo: string;
  let server: MessagesApiServer;
  const sessions: string[] = [];
  const env = (): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    ANTHROPIC_API_KEY: "",
    ANTHROPIC_BASE_URL: "",
  });
  const session = (name: string): string => {
    const key = `${name}-${suffix}`;
    sessions.push(key);
    return key;
  };

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-run-home-"));
    repo = await demoRepo();
    server = await startMessagesApiServer();
  });

  afterAll(async () => {
    await server.close();
    const runner = createRunner({ env: env(), workspace: repo });
    const docker = dockerClient();
    for (const key of sessions) {
      for (const sessionKey of [key, `${key}-verify`]) {
        const plan = await runner.plan({ sessionKey }).catch(() => undefined);
        const name = plan?.sandbox.spec?.containerName;
        if (name)
          await docker
            .getContainer(name)
            .remove({ force: true })
            .catch(() => undefined);
      }
    }
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("the demo: a scripted agent fixes the failing test in a seeded copy; diff and apply round-trip", async () => {
    const key = session("demo");
    const run = await runCordon(
      [
        "run",
        "--workspace",
        repo,
        "--session",
        key,
        "--model-script",
        example("demo", "script.json"),
        "--output-format",
        "json",
        "Fix the failing test.",
      ],
      env(),
    );
    expect(run.stderr).toBe("");
    expect(run.exitCode).toBe(0);
    const result = JSON.parse(run.stdout) as { status: string; turns: number; finalText: string };
    expect(result).toMatchObject({ status: "completed", turns: 5 });

    // The real repository is untouched: the agent worked on a private copy.
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(await readFile(path.join(repo, "pricing.py"), "utf8")).toContain("subtotal + discount");

    const diff = await runCordon(["diff", "--workspace", repo, "--session", key], env());
    expect(diff.exitCode).toBe(0);
    expect(diff.stdout).toContain("-    return subtotal + discount");
    expect(diff.stdout).toContain("+    return subtotal - discount");

    const check = await runCordon(
      ["apply", "--check", "--workspace", repo, "--session", key],
      env(),
    );
    expect(check.exitCode).toBe(0);
    expect(git(repo, "status", "--porcelain")).toBe("");

    const apply = await runCordon(["apply", "--workspace", repo, "--session", key], env());
    expect(apply.exitCode).toBe(0);
    expect(git(repo, "status", "--porcelain")).toBe(" M pricing.py\n");
    git(repo, "checkout", "--", "pricing.py");
  });

  it("stream-json through the real SDK: the tools run in the container as uid 1000 with no network", async () => {
    const key = session("sdk");
    server.enqueue(
      {
        kind: "message",
        content: [
          {
            type: "tool_use",
            id: "toolu_1",
            name: "exec",
            input: {
              command:
                "id -u; cat /etc/hostname >/dev/null; python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\" 2>&1 | tail -1",
            },
          },
        ],
      },
      { kind: "message", content: [{ type: "text", text: "checked" }] },
    );
    const run = await runCordon(
      [
        "run",
        "--workspace",
        repo,
        "--session",
        key,
        "--output-format",
        "stream-json",
        "look around",
      ],
      { ...env(), ANTHROPIC_API_KEY: "test-key", ANTHROPIC_BASE_URL: server.url },
    );
    expect(run.exitCode).toBe(0);
    const events = run.stdout
      .trim()
      .split("\n")
      .map(
        (line) =>
          JSON.parse(line) as { v: number; seq: number; type: string; [key: string]: unknown },
      );
    expect(events.every((event) => event.v === 1)).toBe(true);
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    expect(events.at(-1)?.type).toBe("run-end");
    const ready = events.find((event) => event.type === "sandbox-ready");
    expect(ready).toMatchObject({ kind: "docker" });
    const toolResult = events.find((event) => event.type === "tool-result");
    const output = JSON.stringify(toolResult);
    expect(output).toContain("1000");
    expect(output).toMatch(/Network is unreachable|OSError|timed out/);

    // The system prompt names container paths only, never the host workspace.
    const body = server.requests[0]?.body as { system: unknown };
    expect(JSON.stringify(body.system)).toContain("/workspace");
    expect(JSON.stringify(body.system)).not.toContain(repo);
  });

  it("a tool denied by a run flag is refused at dispatch, naming the flag, and never runs", async () => {
    const key = session("deny");
    const script = path.join(home, `deny-${suffix}.json`);
    await writeFile(
      script,
      JSON.stringify({
        version: 1,
        turns: [
          {
            content: [
              { type: "tool_use", name: "exec", input: { command: "touch /workspace/ran" } },
            ],
          },
          { content: [{ type: "text", text: "ok" }] },
        ],
      }),
    );
    const run = await runCordon(
      [
        "run",
        "--workspace",
        repo,
        "--session",
        key,
        "--model-script",
        script,
        "--deny-tools",
        "exec",
        "--output-format",
        "stream-json",
        "go",
      ],
      env(),
    );
    expect(run.exitCode).toBe(0);
    const refusal = run.stdout.split("\n").find((line) => line.includes('"tool-result"'));
    expect(refusal).toContain("deny");
    expect(refusal).toContain('"isError":true');
    const check = await runCordon(
      ["tool", "ls", "--workspace", repo, "--session", key, "--input", "{}"],
      env(),
    );
    expect(check.stdout).not.toContain("ran");
  });

  it("the host environment, API keys included, never reaches the container", async () => {
    const key = session("env");
    const run = await runCordon(["exec", "--workspace", repo, "--session", key, "--", "env"], {
      ...env(),
      ANTHROPIC_API_KEY: "sk-ant-canary-123",
      GITHUB_TOKEN: "ghp_canary_456",
      AWS_SECRET_ACCESS_KEY: "aws-canary-789",
    });
    expect(run.exitCode).toBe(0);
    expect(run.stdout).toContain("HOME=");
    expect(run.stdout).not.toMatch(/canary/);
    expect(run.stdout).not.toMatch(/ANTHROPIC|GITHUB_TOKEN|AWS_/);
  });

  it("Docker down: exit 3, a clear message, and stream-json still ends with run-end", async () => {
    const run = await runCordon(
      [
        "run",
        "--workspace",
        repo,
        "--session",
        session("down"),
        "--model-script",
        example("demo", "script.json"),
        "--output-format",
        "stream-json",
        "x",
      ],
      { ...env(), DOCKER_HOST: "unix:///nonexistent/docker.sock" },
    );
    expect(run.exitCode).toBe(3);
    const last = JSON.parse(run.stdout.trim().split("\n").at(-1) ?? "{}") as Record<
      string,
      unknown
    >;
    expect(last).toMatchObject({ type: "run-end", status: "sandbox_error", exitCode: 3 });
    expect(String(last["message"])).toMatch(/Docker/i);
  });

  it("no task and no API key are usage errors (exit 2) that name the fix", async () => {
    const empty = await runCordon(["run", "--workspace", repo, "-"], env(), "   ");
    expect(empty.exitCode).toBe(2);
    expect(empty.stderr).toContain("no task");
    const streamed = await runCordon(
      ["run", "--workspace", repo, "--output-format", "stream-json", "-"],
      env(),
      "",
    );
    expect(streamed.exitCode).toBe(2);
    const lines = streamed.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string });
    expect(lines.map((line) => line.type)).toEqual(["run-start", "run-end"]);
    const noKey = await runCordon(
      ["run", "--workspace", repo, "--session", session("nokey"), "--output-format", "json", "x"],
      env(),
    );
    expect(noKey.exitCode).toBe(2);
    expect(noKey.stdout).toContain("ANTHROPIC_API_KEY");
  });

  it("cordon tool: a policy refusal exits 7; a write under /agent in ro mode is refused by the kernel", async () => {
    const denied = await runCordon(
      ["tool", "exec", "--workspace", repo, "--input", '{"command":"true"}'],
      { ...env(), CORDON_CONFIG: await configFile(home, { tools: { deny: ["exec"] } }) },
    );
    expect(denied.exitCode).toBe(7);
    expect(denied.stderr).toContain("tools.deny");

    // An input the tool's schema refuses is a usage error, found before any sandbox is made.
    const invalidKey = session("invalid-input");
    const invalid = await runCordon(
      ["tool", "edit", "--workspace", repo, "--session", invalidKey, "--input", "{}"],
      env(),
    );
    expect(invalid.exitCode).toBe(2);
    expect(invalid.stderr).toContain('Invalid input for tool "edit"; nothing was run');
    expect(invalid.stderr).toContain("- old_text: Invalid input: expected string");
    expect(invalid.stderr).not.toContain("seeded");
    const listed = await runCordon(["sandbox", "list", "--json"], env());
    expect(listed.stdout).not.toContain(invalidKey);

    const roConfig = await configFile(home, {
      agents: { defaults: { sandbox: { workspaceAccess: "ro" } } },
    });
    const key = session("ro");
    const write = await runCordon(
      [
        "tool",
        "write",
        "--workspace",
        repo,
        "--session",
        key,
        "--input",
        JSON.stringify({ path: "/agent/pricing.py", content: "pwned" }),
      ],
      { ...env(), CORDON_CONFIG: roConfig },
    );
    expect(write.exitCode).toBe(1);
    expect(write.stderr.toLowerCase()).toContain("read-only");
    expect(await readFile(path.join(repo, "pricing.py"), "utf8")).not.toContain("pwned");
    const read = await runCordon(
      [
        "tool",
        "read",
        "--workspace",
        repo,
        "--session",
        key,
        "--input",
        '{"path":"/agent/pricing.py"}',
      ],
      { ...env(), CORDON_CONFIG: roConfig },
    );
    expect(read.exitCode).toBe(0);
    expect(read.stdout).toContain("order_total");
  });
});

async function configFile(dir: string, config: unknown): Promise<string> {
  const file = path.join(dir, `config-${Math.random().toString(36).slice(2)}.json5`);
  await writeFile(file, JSON.stringify(config));
  return file;
}
