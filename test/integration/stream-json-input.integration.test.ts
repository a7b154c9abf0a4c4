/**
 * Steering from the CLI: `cordon run --input-format stream-json` (the built CLI, a child process)
 * reads user messages from stdin while the run goes, against a local Messages API server. Tools
 * run on the host (sandbox mode off): the point is the conversation, not the container.
 */
import { spawn } from "node:child_process";
import { access, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import { startMessagesApiServer, type MessagesApiServer } from "../support/messages-api-server.js";
import { removeStateDirectory } from "../support/state-directory.js";

const cli = path.join(packageRoot(), "dist", "cli", "main.js");

interface Envelope {
  type: string;
  [key: string]: unknown;
}

const userLine = (text: string): string =>
  `${JSON.stringify({ type: "user", message: { role: "user", content: text } })}\n`;

describe("cordon run --input-format stream-json", () => {
  let home: string;
  let workspace: string;
  let server: MessagesApiServer;

  beforeAll(async () => {
    home = await mkdtemp(path.join(tmpdir(), "cordon-stream-input-home-"));
    workspace = await mkdtemp(path.join(tmpdir(), "cordon-stream-input-workspace-"));
    server = await startMessagesApiServer();
  });
  afterAll(async () => {
    await server.close();
    await removeStateDirectory(home);
    await rm(workspace, { recursive: true, force: true });
  });

  it("steers while tools run, takes a follow-up as a second round, reports a bad line, ends at EOF", async () => {
    server.enqueue(
      {
        kind: "message",
        content: [
          // Runs until the test has sent its steering message (and made the file `go`).
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
      { kind: "message", content: [{ type: "text", text: "Steered: working on the README." }] },
      { kind: "message", content: [{ type: "text", text: "Second round done." }] },
    );
    const child = spawn(
      process.execPath,
      [
        cli,
        "run",
        "--workspace",
        workspace,
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
      ],
      {
        env: {
          PATH: process.env["PATH"],
          HOME: process.env["HOME"],
          CORDON_HOME: home,
          CORDON_LOG_LEVEL: "silent",
          CORDON_SANDBOX_MODE: "off",
          ANTHROPIC_API_KEY: "test-key",
          ANTHROPIC_BASE_URL: server.url,
        },
        stdio: ["pipe", "pipe", "pipe"],
      },
    );
    const events: Envelope[] = [];
    let stderr = "";
    let buffered = "";
    const waiters: { when: (event: Envelope) => boolean; resolve: () => void }[] = [];
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      buffered += chunk;
      for (let newline = buffered.indexOf("\n"); newline >= 0; newline = buffered.indexOf("\n")) {
        const event = JSON.parse(buffered.slice(0, newline)) as Envelope;
        buffered = buffered.slice(newline + 1);
        events.push(event);
        for (const waiter of waiters.filter((w) => w.when(event))) waiter.resolve();
      }
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    const seen = (when: (event: Envelope) => boolean): Promise<void> =>
      events.some(when)
        ? Promise.resolve()
        : new Promise((resolve) => waiters.push({ when, resolve }));

    child.stdin.write(userLine("Fix the typo in the docs."));
    // While the slow call runs, the user changes course.
    await seen((event) => event.type === "tool-call" && event["toolCallId"] === "call_slow");
    child.stdin.write(userLine("Stop that; update the README instead."));
    // The line is read at once (the CLI only waits on the command); a margin, then let it end.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await writeFile(path.join(workspace, "go"), "");
    await seen((event) => event.type === "run-end");
    // The model stopped; the process waits for more. A bad line, then a follow-up.
    child.stdin.write("this is not json\n");
    child.stdin.write(userLine("Now add a changelog entry."));
    await seen(
      (event) =>
        event.type === "run-end" && events.filter((e) => e.type === "run-end").length === 2,
    );
    child.stdin.end();
    const code = await exited;

    expect(code, stderr).toBe(0);
    expect(server.requests).toHaveLength(3);
    const second = JSON.stringify((server.requests[1]?.body as { messages: unknown }).messages);
    // The slow call ran; the other call of that turn was answered "skipped", then the message.
    expect(second).toMatch(/"tool_use_id":"call_skipped".*Skipped: the user sent a new message/);
    expect(second).toContain("Stop that; update the README instead.");
    await expect(access(path.join(workspace, "never.txt"))).rejects.toThrow();
    const third = JSON.stringify((server.requests[2]?.body as { messages: unknown }).messages);
    expect(third).toContain("Steered: working on the README.");
    expect(third).toContain("Now add a changelog entry.");
    expect(events.filter((event) => event.type === "run-end")).toEqual([
      expect.objectContaining({
        status: "completed",
        finalText: "Steered: working on the README.",
      }),
      expect.objectContaining({ status: "completed", finalText: "Second round done." }),
    ]);
    expect(stderr).toMatch(/^cordon: stdin line 3 skipped: not JSON$/m);
  });
});
