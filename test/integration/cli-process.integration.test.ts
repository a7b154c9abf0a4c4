/**
 * The built CLI as a user runs it — a child process, `node dist/cli/main.js run` — against a local
 * server that speaks the Messages API with SSE, through the real SDK, in real sandboxes: every
 * failure the API can throw at a run, Ctrl-C, and a SIGKILL mid-turn that the next run recovers from.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import { createRunner } from "../../src/runner/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import {
  startMessagesApiServer,
  type MessagesApiServer,
  type ScriptedResponse,
} from "../support/messages-api-server.js";
import { removeStateDirectory } from "../support/state-directory.js";

interface Envelope {
  v: number;
  seq: number;
  type: string;
  [key: string]: unknown;
}

interface CliProcess {
  child: ChildProcess;
  events: Envelope[];
  stderr: () => string;
  /** Resolves with the first event of this type. */
  waitFor(type: string): Promise<Envelope>;
  exited: Promise<number | null>;
}

const cli = path.join(packageRoot(), "dist", "cli", "main.js");
const suffix = `${process.pid}-${Date.now().toString(36)}`;

describe("the built CLI against a Messages API server", () => {
  let home: string;
  let repo: string;
  let server: MessagesApiServer;
  const sessions: string[] = [];

  const env = (): NodeJS.ProcessEnv => ({
    PATH: process.env["PATH"],
    HOME: process.env["HOME"],
    CORDON_HOME: home,
    CORDON_LOG_LEVEL: "silent",
    ANTHROPIC_API_KEY: "test-key",
    ANTHROPIC_BASE_URL: server.url,
  });

  function start(sessionName: string, prompt: string): CliProcess {
    const session = `${sessionName}-${suffix}`;
    if (!sessions.includes(session)) sessions.push(session);
    const child = spawn(
      process.execPath,
      [
        cli,
        "run",
        "--workspace",
        repo,
        "--session",
        session,
        "--output-format",
        "stream-json",
        prompt,
      ],
      { env: env(), stdio: ["ignore", "pipe", "pipe"] },
    );
    const events: Envelope[] = [];
    const waiters: { type: string; resolve: (event: Envelope) => void }[] = [];
    let buffered = "";
    let stderr = "";
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      buffered += chunk;
      let newline = buffered.indexOf("\n");
      while (newline >= 0) {
        const event = JSON.parse(buffered.slice(0, newline)) as Envelope;
        buffered = buffered.slice(newline + 1);
        events.push(event);
        for (const waiter of waiters.filter((w) => w.type === event.type)) waiter.resolve(event);
        newline = buffered.indexOf("\n");
      }
    });
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    const exited = new Promise<number | null>((resolve) =>
      child.on("exit", (code) => resolve(code)),
    );
    return {
      child,
      events,
      stderr: () => stderr,
      exited,
      waitFor: (type) =>
        new Promise((resolve) => {
          const seen = events.find((event) => event.type === type);
          if (seen) resolve(seen);
          else waiters.push({ type, resolve });
        }),
    };
  }

  async function run(sessionName: string, ...responses: ScriptedResponse[]) {
    server.enqueue(...responses);
    const running = start(sessionName, "do the task");
    const code = await running.exited;
    const end = running.events.at(-1);
    return { code, events: running.events, end, stderr: running.stderr() };
  }

  const text = (value: string): ScriptedResponse => ({
    kind: "message",
    content: [{ type: "text", text: value }],
  });

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-cli-process-"));
    repo = await demoRepo();
  });
  beforeEach(async () => {
    server = await startMessagesApiServer();
  });
  afterEach(async () => {
    await server.close();
  });
  afterAll(async () => {
    const runner = createRunner({ env: { CORDON_HOME: home }, workspace: repo });
    for (const sessionKey of sessions) {
      const name = (await runner.plan({ sessionKey })).sandbox.spec?.containerName;
      if (name)
        await dockerClient()
          .getContainer(name)
          .remove({ force: true })
          .catch(() => undefined);
    }
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("529 overloaded beyond the client's retries: each retry is an event, then the loop's own, then the answer", async () => {
    const overloaded: ScriptedResponse = {
      kind: "error",
      status: 529,
      errorType: "overloaded_error",
      message: "Overloaded",
      headers: { "retry-after-ms": "10" },
    };
    // The model client retries twice, each announced; the loop's one retry comes after that.
    const answer: ScriptedResponse = {
      kind: "message",
      model: "claude-sonnet-4-5-20250929",
      content: [{ type: "text", text: "made it" }],
      usage: { input_tokens: 10_000, output_tokens: 1_000 },
    };
    const result = await run("overloaded", overloaded, overloaded, overloaded, answer);
    expect(result.code).toBe(0);
    const retries = result.events.filter((event) => event.type === "retry");
    expect(retries).toMatchObject([
      { attempt: 1, maxRetries: 2, status: 529, reason: "overloaded", delayMs: 10 },
      { attempt: 2, maxRetries: 2, status: 529, reason: "overloaded", delayMs: 10 },
      { status: 529, reason: "overloaded" },
    ]);
    expect(retries[2]).not.toHaveProperty("attempt");
    // The model the API answered with, not the alias asked for; priced at Sonnet 4.5's list price.
    expect(result.end).toMatchObject({
      type: "run-end",
      status: "completed",
      finalText: "made it",
      model: "claude-sonnet-4-5-20250929",
      cost: { usd: 0.045 },
    });
    expect(result.end?.["durationMs"]).toBeGreaterThan(0);
    expect(server.requests).toHaveLength(4);
  });

  it("429 with retry-after: waits as told and goes on", async () => {
    const limited: ScriptedResponse = {
      kind: "error",
      status: 429,
      errorType: "rate_limit_error",
      message: "Rate limited",
      headers: { "retry-after": "1" },
    };
    const result = await run("ratelimit", limited, text("after the wait"));
    expect(result.code).toBe(0);
    expect(result.events.filter((event) => event.type === "retry")).toMatchObject([
      { attempt: 1, status: 429, reason: "rate_limited", delayMs: 1000 },
    ]);
    expect(result.end).toMatchObject({ status: "completed", finalText: "after the wait" });
    expect(server.requests).toHaveLength(2);
  });

  it("an error event mid-stream is retried; the half-streamed message is not kept", async () => {
    const result = await run(
      "midstream",
      {
        kind: "stream-error",
        content: [{ type: "text", text: "half a sent" }],
        errorType: "overloaded_error",
        message: "Overloaded",
      },
      text("whole answer"),
    );
    expect(result.code).toBe(0);
    expect(result.end).toMatchObject({ status: "completed", finalText: "whole answer" });
    const lastRequest = server.requests.at(-1)?.body as { messages: unknown[] };
    expect(JSON.stringify(lastRequest.messages)).not.toContain("half a sent");
  });

  it("a context-overflow 400 is recovered by compaction or one reset, and says so", async () => {
    const overflow: ScriptedResponse = {
      kind: "error",
      status: 400,
      errorType: "invalid_request_error",
      message: "prompt is too long: 250000 tokens > 200000 maximum",
    };
    const result = await run(
      "overflow",
      overflow,
      text("summary of earlier work"),
      text("fits now"),
      text("fits now"),
    );
    expect(result.code).toBe(0);
    expect(result.end).toMatchObject({ status: "completed" });
    expect(
      result.events.some((event) => event.type === "compaction" || event.type === "session-reset"),
    ).toBe(true);
  });

  it("a tool call cut off by max_tokens is never run; the re-issued one runs in the sandbox", async () => {
    const result = await run(
      "maxtokens",
      {
        kind: "message",
        content: [
          {
            type: "tool_use",
            id: "toolu_cut",
            name: "exec",
            rawJson: '{"command":"touch /workspace/CUT',
          },
        ],
        stopReason: "max_tokens",
      },
      {
        kind: "message",
        content: [
          { type: "tool_use", id: "toolu_ok", name: "exec", input: { command: "ls /workspace" } },
        ],
      },
      text("done"),
    );
    expect(result.code).toBe(0);
    const results = result.events.filter((event) => event.type === "tool-result");
    expect(results[0]).toMatchObject({ toolCallId: "toolu_cut", isError: true, skipped: true });
    expect(JSON.stringify(results[1])).toContain("pricing.py");
    expect(JSON.stringify(results[1])).not.toContain("CUT");
  });

  it("a tool the policy denies is refused at dispatch and never runs", async () => {
    server.enqueue(
      {
        kind: "message",
        content: [
          {
            type: "tool_use",
            id: "toolu_w",
            name: "write",
            input: { path: "DENIED", content: "x" },
          },
        ],
      },
      { kind: "message", content: [{ type: "tool_use", id: "toolu_l", name: "ls", input: {} }] },
      text("ok"),
    );
    const child = spawn(
      process.execPath,
      [
        cli,
        "run",
        "--workspace",
        repo,
        "--session",
        `deny-${suffix}`,
        "--deny-tools",
        "write",
        "--output-format",
        "json",
        "try",
      ],
      { env: env(), stdio: ["ignore", "pipe", "pipe"] },
    );
    sessions.push(`deny-${suffix}`);
    let stdout = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    const code = await new Promise((resolve) => child.on("exit", resolve));
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ status: "completed" });
    const second = server.requests[1]?.body as { messages: { content: unknown }[] };
    const refusal = JSON.stringify(second.messages.at(-1));
    expect(refusal).toContain("is_error");
    expect(refusal).toContain("deny");
    const listing = JSON.stringify(
      (server.requests[2]?.body as { messages: unknown[] }).messages.at(-1),
    );
    expect(listing).toContain("pricing.py");
    expect(listing).not.toContain("DENIED");
  });

  it("Ctrl-C (SIGINT) stops the model stream: exit 130, and stream-json still ends with run-end", async () => {
    server.enqueue({ kind: "hang" });
    const running = start("sigint", "wait");
    await running.waitFor("text-delta");
    running.child.kill("SIGINT");
    expect(await running.exited).toBe(130);
    expect(running.events.at(-1)).toMatchObject({
      type: "run-end",
      status: "aborted",
      exitCode: 130,
    });
  });

  it("a run killed with SIGKILL mid-command leaves a session that loads and continues", async () => {
    server.enqueue({
      kind: "message",
      content: [
        { type: "tool_use", id: "toolu_slow", name: "exec", input: { command: "sleep 20" } },
      ],
    });
    const first = start("sigkill", "start something slow");
    await first.waitFor("tool-call");
    first.child.kill("SIGKILL");
    await first.exited;

    server.enqueue(text("picked up where it stopped"));
    const second = start("sigkill", "go on");
    expect(await second.exited).toBe(0);
    expect(second.events.at(-1)).toMatchObject({
      status: "completed",
      finalText: "picked up where it stopped",
    });
    // The interrupted call was answered with an error result before the model was asked again.
    const request = server.requests.at(-1)?.body as {
      messages: { role: string; content: unknown }[];
    };
    const repaired = JSON.stringify(request.messages);
    expect(repaired).toContain('"tool_use_id":"toolu_slow"');
    expect(repaired).toContain('"is_error":true');
  });
});
