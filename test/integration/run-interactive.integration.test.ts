/**
 * `cordon run -i`: a person types while the run goes, against a local Messages API server. Lines
 * on stdin (a pipe, to time the steering exactly), then a real terminal (test/support/pty-session.py)
 * for the follow-up and Ctrl-D. Tools run on the host (mode off): the point is the conversation.
 */
import { spawn } from "node:child_process";
import { access, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { startMessagesApiServer, type MessagesApiServer } from "../support/messages-api-server.js";
import { builtCli, cordonOnTerminal } from "../support/spawn-cordon.js";
import { removeStateDirectory } from "../support/state-directory.js";

describe("cordon run -i", () => {
  let home: string;
  let workspace: string;
  let server: MessagesApiServer;

  const env = (): NodeJS.ProcessEnv => ({
    PATH: process.env["PATH"],
    HOME: process.env["HOME"],
    CORDON_HOME: home,
    CORDON_LOG_LEVEL: "silent",
    CORDON_SANDBOX_MODE: "off",
    ANTHROPIC_API_KEY: "test-key",
    ANTHROPIC_BASE_URL: server.url,
  });

  beforeAll(async () => {
    home = await mkdtemp(path.join(tmpdir(), "cordon-run-i-home-"));
    workspace = await mkdtemp(path.join(tmpdir(), "cordon-run-i-workspace-"));
    server = await startMessagesApiServer();
  });
  afterAll(async () => {
    await server.close();
    await removeStateDirectory(home);
    await rm(workspace, { recursive: true, force: true });
  });

  it("a line typed while tools run steers; one typed after the answer is a follow-up; EOF ends", async () => {
    server.enqueue(
      {
        kind: "message",
        content: [
          {
            type: "tool_use",
            id: "call_slow",
            name: "exec",
            input: { command: "until [ -e go ]; do sleep 0.1; done" },
          },
          {
            type: "tool_use",
            id: "call_skipped",
            name: "write",
            input: { path: "never.txt", content: "should not be written" },
          },
        ],
      },
      { kind: "message", content: [{ type: "text", text: "Steered: on the README." }] },
      { kind: "message", content: [{ type: "text", text: "Changelog done." }] },
    );
    const before = server.requests.length;
    const child = spawn(
      process.execPath,
      [builtCli, "run", "-i", "--workspace", workspace, "Fix the typo in the docs."],
      { env: env(), stdio: ["pipe", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    const waiters: { text: string; resolve: () => void }[] = [];
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
      for (const waiter of waiters.filter((w) => stderr.includes(w.text))) waiter.resolve();
    });
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    const seen = (text: string): Promise<void> =>
      stderr.includes(text)
        ? Promise.resolve()
        : new Promise((r) => waiters.push({ text, resolve: r }));

    await seen("→ exec until");
    child.stdin.write("Stop that; update the README instead.\n");
    await new Promise((resolve) => setTimeout(resolve, 500));
    await writeFile(path.join(workspace, "go"), "");
    await seen("waiting for your next message");
    child.stdin.write("\n   \nNow add a changelog entry.\n");
    await seen("Changelog done.");
    child.stdin.end();
    const code = await exited;

    expect(code, stderr).toBe(0);
    expect(server.requests).toHaveLength(before + 3);
    const second = JSON.stringify(
      (server.requests[before + 1]?.body as { messages: unknown }).messages,
    );
    expect(second).toMatch(/"tool_use_id":"call_skipped".*Skipped: the user sent a new message/);
    expect(second).toContain("Stop that; update the README instead.");
    await expect(access(path.join(workspace, "never.txt"))).rejects.toThrow();
    const third = JSON.stringify(
      (server.requests[before + 2]?.body as { messages: unknown }).messages,
    );
    // Blank lines are nothing; the typed text is the message, as typed.
    expect(third).toContain('"text":"Now add a changelog entry."');
    expect(stdout).toBe("Steered: on the README.\nChangelog done.\n");
    expect(stderr).toContain("type to steer while tools run");
    // The steered line is acknowledged, and the prompt marker shows where the next line goes.
    expect(stderr).toContain("· steering: the agent gets it after the tool call in progress");
    expect(stderr).toMatch(/waiting for your next message \(Ctrl-D ends\)\n› /);
  });

  it("on a terminal: the task typed first, a follow-up after the answer, Ctrl-D ends with exit 0", async () => {
    server.enqueue(
      { kind: "message", content: [{ type: "text", text: "First answer." }] },
      { kind: "message", content: [{ type: "text", text: "Second answer." }] },
    );
    const before = server.requests.length;
    const result = await cordonOnTerminal(
      [
        { expect: "type the task and press Enter (Ctrl-D ends)\r\n› " },
        { send: "Say something.\n" },
        { expect: "waiting for your next message (Ctrl-D ends)\r\n› " },
        { send: "And again.\n" },
        { expect: "Second answer." },
        // Ctrl-D: end of input; the conversation ends once the run in progress has.
        { send: "\u0004" },
      ],
      ["run", "-i", "--workspace", workspace],
      { env: env(), cwd: workspace },
    );
    expect(result.exitCode, result.output).toBe(0);
    expect(result.output).toContain("First answer.");
    expect(result.output).toContain("Second answer.");
    expect(server.requests).toHaveLength(before + 2);
    const second = JSON.stringify(
      (server.requests[before + 1]?.body as { messages: unknown }).messages,
    );
    expect(second).toContain("Say something.");
    expect(second).toContain("And again.");
  });
});
