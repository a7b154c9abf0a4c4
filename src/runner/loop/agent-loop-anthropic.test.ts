import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  startMessagesApiServer,
  type MessagesApiServer,
} from "../../../test/support/messages-api-server.js";
import { AnthropicModelClient } from "../model/index.js";
import { JsonlSession } from "../session/index.js";
import { runAgentLoop } from "./agent-loop.js";
import type { ToolResult } from "../../tools/index.js";
import type { RunnerToolset } from "./tool-executor.js";

/** The loop on the real SDK against a local Messages API server. */
let server: MessagesApiServer;
let stateDir: string;
let session: JsonlSession;

beforeAll(async () => {
  server = await startMessagesApiServer();
});
afterAll(async () => {
  await server.close();
});
beforeEach(async () => {
  server.requests.length = 0;
  stateDir = await mkdtemp(path.join(tmpdir(), "cordon-loop-sdk-"));
  session = await JsonlSession.open({ stateDir, sessionKey: "agent:main:sdk" });
});
afterEach(async () => {
  await session.close();
  await rm(stateDir, { recursive: true, force: true });
  expect(server.pending).toBe(0);
});

function toolset(calls: unknown[]): RunnerToolset {
  return {
    specs: [{ name: "write", description: "write a file", inputSchema: { type: "object" } }],
    call: (_name, input): Promise<ToolResult> => {
      calls.push(input);
      return Promise.resolve({ content: [{ type: "text", text: "written" }], isError: false });
    },
  };
}

function model(maxRetries: number): AnthropicModelClient {
  return new AnthropicModelClient({ apiKey: "k", baseURL: server.url, maxRetries });
}

describe("runAgentLoop with AnthropicModelClient", () => {
  it("does not run a tool call cut off by max_tokens, then runs the re-issued one", async () => {
    server.enqueue(
      {
        kind: "message",
        content: [
          { type: "tool_use", id: "toolu_a", name: "write", rawJson: '{"path":"a","data":"xx' },
        ],
        stopReason: "max_tokens",
      },
      {
        kind: "message",
        content: [{ type: "tool_use", id: "toolu_b", name: "write", input: { path: "a" } }],
      },
      { kind: "message", content: [{ type: "text", text: "Done." }] },
    );
    const calls: unknown[] = [];
    const result = await runAgentLoop({
      model: model(0),
      modelId: "claude-test",
      toolset: toolset(calls),
      session,
      systemPrompt: "sys",
      prompt: "write a",
    });
    expect(result).toMatchObject({ status: "completed", turns: 3, finalText: "Done." });
    expect(calls).toEqual([{ path: "a" }]);
    const second = server.requests[1]?.body as { messages: { role: string; content: unknown[] }[] };
    expect(second.messages[2]?.content[0]).toMatchObject({
      type: "tool_result",
      tool_use_id: "toolu_a",
      is_error: true,
    });
  });

  it("survives a 529 that outlasts the SDK retries with its own single retry", async () => {
    const overloaded = {
      kind: "error" as const,
      status: 529,
      errorType: "overloaded_error",
      message: "Overloaded",
      headers: { "retry-after-ms": "1" },
    };
    server.enqueue(overloaded, overloaded, {
      kind: "message",
      content: [{ type: "text", text: "Finally." }],
    });
    const events: string[] = [];
    const result = await runAgentLoop({
      model: model(1),
      modelId: "claude-test",
      toolset: toolset([]),
      session,
      systemPrompt: "sys",
      prompt: "hi",
      retryDelayMs: 0,
      io: { onEvent: (e) => events.push(e.type) },
    });
    expect(result.status).toBe("completed");
    expect(server.requests).toHaveLength(3);
    expect(events).toContain("retry");
  });

  it("reports the model the API answered with, the run's duration and its estimated cost", async () => {
    server.enqueue(
      {
        kind: "message",
        model: "claude-sonnet-4-5-20250929",
        content: [{ type: "tool_use", id: "toolu_w", name: "write", input: { path: "a" } }],
        usage: { input_tokens: 100_000, output_tokens: 2_000, cache_creation_input_tokens: 0 },
      },
      {
        kind: "message",
        model: "claude-sonnet-4-5-20250929",
        content: [{ type: "text", text: "Written." }],
        usage: { input_tokens: 1_000, output_tokens: 1_000, cache_read_input_tokens: 100_000 },
      },
    );
    const result = await runAgentLoop({
      model: model(0),
      modelId: "claude-sonnet-4-5",
      toolset: toolset([]),
      session,
      systemPrompt: "sys",
      prompt: "write a",
    });
    expect(result).toMatchObject({ status: "completed", model: "claude-sonnet-4-5-20250929" });
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
    // $3/MTok in, $15/MTok out, $0.30/MTok cache reads: 0.3 + 0.03 + 0.003 + 0.015 + 0.03.
    expect(result.cost.usd).toBeCloseTo(0.378, 6);

    server.enqueue({
      kind: "message",
      model: "acme-large",
      content: [{ type: "text", text: "x" }],
    });
    const unknown = await runAgentLoop({
      model: model(0),
      modelId: "claude-sonnet-4-5",
      toolset: toolset([]),
      session,
      systemPrompt: "sys",
      prompt: "again",
    });
    expect(unknown.model).toBe("acme-large");
    expect(unknown.cost).toEqual({
      usd: null,
      reason: expect.stringContaining('"acme-large"') as string,
    });
  });

  it("ends with a clear message on a 401", async () => {
    server.enqueue({
      kind: "error",
      status: 401,
      errorType: "authentication_error",
      message: "invalid x-api-key",
    });
    const result = await runAgentLoop({
      model: model(0),
      modelId: "claude-test",
      toolset: toolset([]),
      session,
      systemPrompt: "sys",
      prompt: "hi",
    });
    expect(result).toMatchObject({ status: "model_error", exitCode: 4 });
    expect(result.message).toMatch(/rejected the credentials/);
    expect(result.fix).toMatch(/ANTHROPIC_API_KEY/);
  });
});
