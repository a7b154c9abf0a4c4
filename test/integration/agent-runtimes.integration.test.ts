/**
 * Bring your own agent (docs/runtimes.md): Claude Code itself, installed in cordon's agent image,
 * runs in a seeded sandbox against a local Messages API server through cordon's model gateway,
 * and a generic `command` runtime runs a small script agent. Shown: the change lands in the
 * seeded copy and `cordon diff`, the real workspace is untouched, the sandbox has no network but
 * the gateway, the real key never enters the container while the API receives it, and the events
 * and exit codes are those of cordon's own loop.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createRunner } from "../../src/runner/index.js";
import { AgentImage, DockerEngine } from "../../src/sandbox/index.js";
import { demoRepo, git } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { startMessagesApiServer, type MessagesApiServer } from "../support/messages-api-server.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

const suffix = `${process.pid}-${Date.now().toString(36)}`;
/** The host's real key: the server must receive it, the sandbox must never hold it. */
const realKey = `sk-ant-api03-${randomBytes(16).toString("hex")}`;
const [keyHead, keyTail] = [realKey.slice(0, 20), realKey.slice(20)];

interface StreamEvent {
  type: string;
  [field: string]: unknown;
}

const streamEvents = (stdout: string): StreamEvent[] =>
  stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as StreamEvent);

/** The text a Messages request carries back for one tool call (what the agent's tool printed). */
function toolResultText(body: unknown, toolUseId: string): string {
  const messages = (body as { messages?: { content?: unknown }[] } | undefined)?.messages ?? [];
  for (const message of messages) {
    if (!Array.isArray(message.content)) continue;
    for (const block of message.content as { tool_use_id?: string; content?: unknown }[]) {
      if (block.tool_use_id === toolUseId) return JSON.stringify(block.content);
    }
  }
  return "";
}

describe("agent runtimes: Claude Code and a command, in cordon's sandbox", () => {
  let home: string;
  let repo: string;
  let server: MessagesApiServer;
  let configDir: string;
  const sessions: string[] = [];
  const env = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    ANTHROPIC_API_KEY: realKey,
    ANTHROPIC_BASE_URL: server.url,
    ...extra,
  });
  const session = (name: string): string => {
    const key = `${name}-${suffix}`;
    sessions.push(key);
    return key;
  };

  beforeAll(async () => {
    await requireSandboxImage();
    // Skipped when current (CI builds it once per image recipe: see docs/runtimes.md).
    await new AgentImage(DockerEngine.fromEnv(process.env), "claude-code").build();
    home = await mkdtemp(path.join(tmpdir(), "cordon-runtimes-home-"));
    configDir = await mkdtemp(path.join(tmpdir(), "cordon-runtimes-config-"));
    repo = await demoRepo();
    server = await startMessagesApiServer();
  });

  afterAll(async () => {
    await server?.close();
    const docker = dockerClient();
    for (const runtime of ["claude-code", "cordon"] as const) {
      const runner = createRunner({ env: env(), workspace: repo, runtime });
      for (const sessionKey of sessions) {
        const name = (await runner.plan({ sessionKey }).catch(() => undefined))?.sandbox.spec
          ?.containerName;
        if (!name) continue;
        await docker
          .getContainer(name)
          .remove({ force: true })
          .catch(() => undefined);
        for (const extra of ["-egress"]) {
          await docker
            .getContainer(`${name}${extra}`)
            .remove({ force: true })
            .catch(() => undefined);
        }
      }
    }
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
    await rm(configDir, { recursive: true, force: true });
  });

  it("Claude Code reads, edits and tests in the seeded copy; its calls carry the real key only past the gateway", async () => {
    const key = session("claude");
    // What the Bash call reports: the key is looked for in every process's environment and
    // command line and in every text file. Its halves are joined only inside the scan, in a shell
    // variable that is not exported, and grep gets it through a pipe (-f), never as an argument:
    // a grep started with the key in its argv is itself a process whose command line holds it,
    // which the scan's own `cat /proc/*/cmdline` could read.
    const scan = [
      `k=$(printf %s%s '${keyHead}' '${keyTail}')`,
      'procs=$( (cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; env) | tr "\\0" "\\n" | grep -cFf <(printf "%s\\n" "$k"))',
      'files=$(grep -rlIFf <(printf "%s\\n" "$k") / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null | wc -l)',
      'echo "key in processes: $procs, in files: $files; placeholder: $(printenv ANTHROPIC_API_KEY | cut -c1-15)"',
      'curl -sS -m 5 -o /dev/null https://api.anthropic.com/ 2>&1 | tail -1 | sed "s/^/proxied: /"',
      "curl -sS -m 5 --noproxy '*' -o /dev/null https://api.anthropic.com/ 2>&1 | tail -1 | sed 's/^/direct: /'",
      "python3 -m unittest 2>&1 | tail -1",
    ].join("; ");
    server.enqueue(
      {
        kind: "message",
        content: [
          { type: "text", text: "Let me read the pricing code." },
          {
            type: "tool_use",
            id: "toolu_read",
            name: "Read",
            input: { file_path: "/workspace/pricing.py" },
          },
        ],
      },
      {
        kind: "message",
        content: [
          {
            type: "tool_use",
            id: "toolu_edit",
            name: "Edit",
            input: {
              file_path: "/workspace/pricing.py",
              old_string: "    return subtotal + discount",
              new_string: "    return subtotal - discount",
            },
          },
        ],
      },
      {
        kind: "message",
        content: [
          {
            type: "tool_use",
            id: "toolu_bash",
            name: "Bash",
            input: { command: scan, description: "check the environment and run the tests" },
          },
        ],
      },
      {
        kind: "message",
        content: [{ type: "text", text: "The discount is now subtracted; the tests pass." }],
        usage: { input_tokens: 30, output_tokens: 12 },
      },
    );
    const before = server.requests.length;

    const run = await runCordon(
      [
        "run",
        "--runtime",
        "claude-code",
        "--workspace",
        repo,
        "--session",
        key,
        "--model",
        "claude-test-model",
        "--output-format",
        "stream-json",
        "Fix the failing test.",
      ],
      env(),
    );
    const events = streamEvents(run.stdout);
    const end = events.at(-1);
    expect(end, run.stderr).toMatchObject({
      type: "run-end",
      status: "completed",
      exitCode: 0,
      finalText: "The discount is now subtracted; the tests pass.",
    });
    expect(run.exitCode).toBe(0);

    // The API got every call with the real key, never the placeholder; the sandbox got neither.
    const calls = server.requests.slice(before);
    expect(calls.map((call) => call.path.split("?")[0])).toEqual(Array(4).fill("/v1/messages"));
    for (const call of calls) {
      expect(call.headers["x-api-key"]).toBe(realKey);
      expect(JSON.stringify(call.headers)).not.toContain("cordon-gateway-");
    }
    const report = toolResultText(calls[3]?.body, "toolu_bash");
    expect(report).toContain("key in processes: 0, in files: 0; placeholder: cordon-gateway-");
    // No network but the gateway: the proxy refuses, and there is no route or DNS without it.
    expect(report, report).toMatch(/proxied: curl: \(56\)[^"]*403/);
    // No DNS in a sandbox with only loopback: the name never resolves.
    expect(report, report).toMatch(
      /direct: curl: \((6|28)\) (Could not resolve|Resolving timed out)/,
    );
    expect(report, report).toMatch(/\\nOK"$/);

    // The events of cordon's own loop, in its order, from Claude Code's stream.
    const types = events.map((event) => event.type);
    expect(types[0]).toBe("run-start");
    expect(types).toContain("sandbox-ready");
    expect(events.filter((event) => event.type === "tool-call").map((e) => e.name)).toEqual([
      "Read",
      "Edit",
      "Bash",
    ]);
    expect(
      events.filter((event) => event.type === "tool-result").map((e) => [e.name, e.isError]),
    ).toEqual([
      ["Read", false],
      ["Edit", false],
      ["Bash", false],
    ]);
    expect(types.filter((type) => type === "model-start")).toHaveLength(4);
    expect(events.filter((event) => event.type === "model-gateway")).toEqual(
      Array(4).fill(
        expect.objectContaining({
          method: "POST",
          path: "/v1/messages",
          model: "claude-test-model",
          status: 200,
          outputTokens: expect.any(Number) as number,
        }),
      ),
    );
    expect(events).toContainEqual(
      expect.objectContaining({ type: "egress", host: "api.anthropic.com", allowed: false }),
    );
    expect(end).toMatchObject({ turns: 4, usage: { outputTokens: expect.any(Number) as number } });

    // The change is in the seeded copy, shown by diff; the real workspace is untouched.
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(await readFile(path.join(repo, "pricing.py"), "utf8")).toContain("subtotal + discount");
    const diff = await runCordon(
      ["diff", "--runtime", "claude-code", "--workspace", repo, "--session", key],
      env(),
    );
    expect(diff.exitCode, diff.stderr).toBe(0);
    expect(diff.stdout).toContain("+    return subtotal - discount");

    // `cordon logs` reads the same events back from the session.
    const logs = await runCordon(["logs", "--workspace", repo, "--session", key, "--json"], env());
    expect(logs.exitCode, logs.stderr).toBe(0);
    expect(logs.stdout).toContain('"type":"model-gateway"');
    expect(logs.stdout).toContain('"name":"Edit"');
  });

  it("Claude Code whose API call fails ends as cordon's own loop would: model_error, exit 4", async () => {
    const key = session("claude-error");
    // A 400 is not retried: one answer is all Claude Code asks for (the server answers any
    // further call with a 400 of its own, so a retry would end the same way).
    server.enqueue({
      kind: "error",
      status: 400,
      errorType: "invalid_request_error",
      message: "this model does not exist",
    });
    const run = await runCordon(
      [
        "run",
        "--runtime",
        "claude-code",
        "--workspace",
        repo,
        "--session",
        key,
        "--output-format",
        "json",
        "Do something.",
      ],
      env(),
    );
    expect(run.exitCode, run.stderr).toBe(4);
    expect(JSON.parse(run.stdout)).toMatchObject({ status: "model_error", exitCode: 4 });
    expect(server.pending).toBe(0);
    expect(git(repo, "status", "--porcelain")).toBe("");
  });

  it("fix-tests --runtime claude-code verifies Claude Code's patch as cordon's own: a fix passes, a test edit fails", async () => {
    /** Claude Code reads a file and replaces one line of it, then says it is done. */
    const readThenEdit = (file: string, from: string, to: string) => {
      server.enqueue(
        {
          kind: "message",
          content: [
            {
              type: "tool_use",
              id: "toolu_r",
              name: "Read",
              input: { file_path: `/workspace/${file}` },
            },
          ],
        },
        {
          kind: "message",
          content: [
            {
              type: "tool_use",
              id: "toolu_e",
              name: "Edit",
              input: { file_path: `/workspace/${file}`, old_string: from, new_string: to },
            },
          ],
        },
        { kind: "message", content: [{ type: "text", text: "Done." }] },
      );
    };
    const fixTests = async (name: string) => {
      const out = path.join(home, name);
      const run = await runCordon(
        [
          "fix-tests",
          "--runtime",
          "claude-code",
          "--workspace",
          repo,
          "--test-cmd",
          "python3 -m unittest -v",
          "--out",
          out,
        ],
        env(),
      );
      const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as {
        status: string;
        exitCode: number;
        sessionKey: string;
        filesChanged: { path: string }[];
      };
      sessions.push(result.sessionKey, `${result.sessionKey}-verify`);
      return { run, result };
    };

    readThenEdit("pricing.py", "    return subtotal + discount", "    return subtotal - discount");
    const fixed = await fixTests("fixed");
    expect(fixed.run.exitCode, fixed.run.stderr).toBe(0);
    expect(fixed.result).toMatchObject({ status: "fixed", exitCode: 0 });
    expect(fixed.result.filesChanged.map((file) => file.path)).toEqual(["pricing.py"]);

    readThenEdit("test_pricing.py", "discount_percent=10), 1800)", "discount_percent=10), 2200)");
    const cheat = await fixTests("cheat");
    expect(cheat.run.exitCode, cheat.run.stderr).toBe(8);
    expect(cheat.result.exitCode).toBe(8);
    expect(git(repo, "status", "--porcelain")).toBe("");
  });

  it("a command runtime: a small script agent gets the task, edits the copy, and its exit code decides", async () => {
    const agent = [
      "import sys, pathlib",
      "task = sys.argv[-1]",
      "print(f'task: {task}')",
      "p = pathlib.Path('pricing.py')",
      "p.write_text(p.read_text().replace('subtotal + discount', 'subtotal - discount'))",
      "print('fixed the sign of the discount')",
      "sys.exit(0 if 'fail' not in task else 3)",
    ].join("\n");
    const config = path.join(configDir, "cordon.json5");
    await writeFile(
      config,
      JSON.stringify({ agents: { defaults: { runtime: { command: ["python3", "-c", agent] } } } }),
    );
    const key = session("command");
    const run = await runCordon(
      ["run", "--workspace", repo, "--session", key, "Fix the discount."],
      env({ CORDON_CONFIG: config, ANTHROPIC_API_KEY: "" }),
    );
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout).toBe("task: Fix the discount.\nfixed the sign of the discount\n");
    expect(git(repo, "status", "--porcelain")).toBe("");
    const diff = await runCordon(
      ["diff", "--workspace", repo, "--session", key],
      env({ CORDON_CONFIG: config }),
    );
    expect(diff.stdout).toContain("+    return subtotal - discount");

    const failing = await runCordon(
      [
        "run",
        "--workspace",
        repo,
        "--session",
        session("command-fail"),
        "--output-format",
        "json",
        "make it fail",
      ],
      env({ CORDON_CONFIG: config, ANTHROPIC_API_KEY: "" }),
    );
    expect(failing.exitCode).toBe(4);
    expect(JSON.parse(failing.stdout)).toMatchObject({
      status: "model_error",
      message: expect.stringContaining("exited with code 3") as string,
      finalText: "task: make it fail\nfixed the sign of the discount",
    });
  });
});
