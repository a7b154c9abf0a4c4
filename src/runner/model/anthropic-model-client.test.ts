import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  startMessagesApiServer,
  type MessagesApiServer,
} from "../../../test/support/messages-api-server.js";
import { AbortedError } from "../../common/index.js";
import { AnthropicModelClient, anthropicOptionsFromEnv } from "./anthropic-model-client.js";
import { ModelApiError } from "./model-errors.js";
import { completeTurn, type ModelRequest, type ModelStreamEvent } from "./types.js";

let server: MessagesApiServer;

beforeAll(async () => {
  server = await startMessagesApiServer();
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => {
  server.requests.length = 0;
  expect(server.pending).toBe(0);
});

function client(maxRetries = 0): AnthropicModelClient {
  return new AnthropicModelClient({ apiKey: "test-key", baseURL: server.url, maxRetries });
}

function request(overrides: Partial<ModelRequest> = {}): ModelRequest {
  return {
    model: "claude-test",
    system: "You are a test.",
    messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
    tools: [
      {
        name: "exec",
        description: "run a command",
        inputSchema: { type: "object", properties: { command: { type: "string" } } },
      },
    ],
    maxTokens: 1000,
    ...overrides,
  };
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a failure");
}

describe("AnthropicModelClient against a Messages API server", () => {
  it("streams text deltas and returns the assembled message with usage", async () => {
    server.enqueue({
      kind: "message",
      content: [{ type: "text", text: "Hello from the test server." }],
      usage: {
        input_tokens: 42,
        output_tokens: 7,
        cache_read_input_tokens: 30,
        cache_creation_input_tokens: 12,
      },
    });
    const events: ModelStreamEvent[] = [];
    for await (const event of client().stream(request())) events.push(event);

    const deltas = events.filter((e) => e.type === "text-delta").map((e) => e.text);
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe("Hello from the test server.");
    const done = events.at(-1);
    expect(done?.type).toBe("done");
    if (done?.type !== "done") return;
    expect(done.turn.message.content).toEqual([
      { type: "text", text: "Hello from the test server." },
    ]);
    expect(done.turn.stopReason).toBe("end_turn");
    expect(done.turn.usage).toEqual({
      inputTokens: 42,
      outputTokens: 7,
      cacheReadTokens: 30,
      cacheWriteTokens: 12,
    });
  });

  it("sends the key, model, tools and cache breakpoints on the stable prefix", async () => {
    server.enqueue({ kind: "message", content: [{ type: "text", text: "ok" }] });
    await completeTurn(client(), request());
    const sent = server.requests[0];
    expect(sent?.path).toContain("/v1/messages");
    // SDK 1.x sends the key as a bearer token; older ones used x-api-key.
    const auth = sent?.headers["x-api-key"] ?? sent?.headers.authorization;
    expect(auth).toMatch(/^(Bearer )?test-key$/);
    const body = sent?.body as Record<string, unknown>;
    expect(body["model"]).toBe("claude-test");
    expect(body["stream"]).toBe(true);
    expect(body["max_tokens"]).toBe(1000);
    expect(body["system"]).toEqual([
      { type: "text", text: "You are a test.", cache_control: { type: "ephemeral" } },
    ]);
    expect(body["tools"]).toEqual([
      {
        name: "exec",
        description: "run a command",
        input_schema: { type: "object", properties: { command: { type: "string" } } },
        cache_control: { type: "ephemeral" },
      },
    ]);
  });

  it("parses tool_use input from input_json_delta chunks, several calls in one turn", async () => {
    server.enqueue({
      kind: "message",
      content: [
        { type: "text", text: "Running two things." },
        { type: "tool_use", id: "toolu_1", name: "exec", input: { command: "ls -la /workspace" } },
        { type: "tool_use", id: "toolu_2", name: "read", input: { path: "a.txt", nested: [1, 2] } },
      ],
    });
    const turn = await completeTurn(client(), request());
    expect(turn.stopReason).toBe("tool_use");
    expect(turn.message.content.slice(1)).toEqual([
      { type: "tool_use", id: "toolu_1", name: "exec", input: { command: "ls -la /workspace" } },
      { type: "tool_use", id: "toolu_2", name: "read", input: { path: "a.txt", nested: [1, 2] } },
    ]);
  });

  it("keeps thinking blocks verbatim and sends them back unchanged", async () => {
    const signature = "c2lnbmF0dXJlLWJ5dGVzLXRoYXQtbXVzdC1yb3VuZC10cmlw==";
    server.enqueue({
      kind: "message",
      content: [
        { type: "thinking", thinking: "Let me think about ünïcode and spaces  .", signature },
        { type: "redacted_thinking", data: "ENCRYPTED+/=" },
        { type: "tool_use", id: "toolu_9", name: "exec", input: { command: "true" } },
      ],
    });
    const first = await completeTurn(client(), request({ thinking: { budgetTokens: 2048 } }));
    expect(first.message.content[0]).toEqual({
      type: "thinking",
      thinking: "Let me think about ünïcode and spaces  .",
      signature,
    });
    expect((server.requests[0]?.body as Record<string, unknown>)["thinking"]).toEqual({
      type: "enabled",
      budget_tokens: 2048,
    });

    server.enqueue({ kind: "message", content: [{ type: "text", text: "done" }] });
    await completeTurn(
      client(),
      request({
        messages: [
          { role: "user", content: [{ type: "text", text: "hi" }] },
          first.message,
          {
            role: "user",
            content: [
              {
                type: "tool_result",
                toolUseId: "toolu_9",
                content: [{ type: "text", text: "" }],
                isError: false,
              },
            ],
          },
        ],
      }),
    );
    const messages = (server.requests[1]?.body as { messages: { content: unknown[] }[] }).messages;
    expect(messages[1]?.content.slice(0, 2)).toEqual([
      { type: "thinking", thinking: "Let me think about ünïcode and spaces  .", signature },
      { type: "redacted_thinking", data: "ENCRYPTED+/=" },
    ]);
    expect(messages[2]?.content[0]).toEqual({
      type: "tool_result",
      tool_use_id: "toolu_9",
      content: [{ type: "text", text: "" }],
      is_error: false,
      cache_control: { type: "ephemeral" },
    });
  });

  it("merges consecutive tool-result messages into one user turn", async () => {
    server.enqueue({ kind: "message", content: [{ type: "text", text: "ok" }] });
    const result = (id: string) => ({
      role: "user" as const,
      content: [
        {
          type: "tool_result" as const,
          toolUseId: id,
          content: [{ type: "text" as const, text: id }],
          isError: false,
        },
      ],
    });
    await completeTurn(
      client(),
      request({
        messages: [
          { role: "user", content: [{ type: "text", text: "go" }] },
          {
            role: "assistant",
            content: [
              { type: "tool_use", id: "a", name: "exec", input: {} },
              { type: "tool_use", id: "b", name: "exec", input: {} },
            ],
          },
          result("a"),
          result("b"),
        ],
      }),
    );
    const messages = (server.requests[0]?.body as { messages: { role: string }[] }).messages;
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
  });

  it("marks a tool call cut off by max_tokens as truncated", async () => {
    server.enqueue({
      kind: "message",
      content: [
        { type: "text", text: "Writing the file." },
        { type: "tool_use", id: "toolu_cut", name: "write", rawJson: '{"path":"a.txt","conte' },
      ],
      stopReason: "max_tokens",
    });
    const turn = await completeTurn(client(), request());
    expect(turn.stopReason).toBe("max_tokens");
    expect(turn.message.content[1]).toEqual({
      type: "tool_use",
      id: "toolu_cut",
      name: "write",
      input: {},
      truncated: true,
    });
  });

  it("treats a last tool call as truncated on max_tokens even when its JSON happens to parse", async () => {
    server.enqueue({
      kind: "message",
      content: [{ type: "tool_use", id: "toolu_x", name: "exec", input: { command: "rm" } }],
      stopReason: "max_tokens",
      omitLastBlockStop: true,
    });
    const turn = await completeTurn(client(), request());
    expect(turn.message.content[0]).toMatchObject({ type: "tool_use", truncated: true });
  });

  it.each([
    ["pause_turn"],
    ["refusal"],
    ["model_context_window_exceeded"],
    ["stop_sequence"],
  ] as const)("reports stop reason %s", async (stopReason) => {
    server.enqueue({ kind: "message", content: [{ type: "text", text: "x" }], stopReason });
    const turn = await completeTurn(client(), request());
    expect(turn.stopReason).toBe(stopReason);
  });

  it("retries a 529 itself, announcing the retry with its status and the server's wait", async () => {
    server.enqueue(
      {
        kind: "error",
        status: 529,
        errorType: "overloaded_error",
        message: "Overloaded",
        headers: { "retry-after-ms": "20" },
      },
      { kind: "message", content: [{ type: "text", text: "after retry" }] },
    );
    const events: ModelStreamEvent[] = [];
    for await (const event of client(2).stream(request())) events.push(event);
    expect(events[0]).toEqual({
      type: "retry",
      attempt: 1,
      maxRetries: 2,
      reason: "overloaded",
      status: 529,
      delayMs: 20,
      error: "The model API is overloaded: Overloaded",
    });
    expect(events.filter((e) => e.type === "retry")).toHaveLength(1);
    const done = events.at(-1);
    expect(done?.type === "done" && done.turn.message.content).toEqual([
      { type: "text", text: "after retry" },
    ]);
    expect(server.requests).toHaveLength(2);
  });

  it("gives up after maxRetries, each retry announced, and never retries a 400", async () => {
    const overloaded = {
      kind: "error",
      status: 529,
      errorType: "overloaded_error",
      message: "Overloaded",
      headers: { "retry-after-ms": "1" },
    } as const;
    server.enqueue(overloaded, overloaded, overloaded);
    const events: ModelStreamEvent[] = [];
    const error = await failure(
      (async () => {
        for await (const event of client(2).stream(request())) events.push(event);
      })(),
    );
    expect(error).toMatchObject({ kind: "overloaded", status: 529 });
    expect(events.map((e) => e.type === "retry" && e.attempt)).toEqual([1, 2]);
    expect(server.requests).toHaveLength(3);

    server.requests.length = 0;
    server.enqueue({
      kind: "error",
      status: 400,
      errorType: "invalid_request_error",
      message: "max_tokens: must be positive",
    });
    expect(await failure(completeTurn(client(2), request()))).toMatchObject({ status: 400 });
    expect(server.requests).toHaveLength(1);
  });

  it("retries an overloaded error sent inside the stream before any content", async () => {
    server.enqueue(
      { kind: "stream-error", errorType: "overloaded_error", message: "Overloaded" },
      { kind: "message", content: [{ type: "text", text: "second time" }] },
    );
    const events: ModelStreamEvent[] = [];
    for await (const event of client(1).stream(request())) events.push(event);
    expect(events[0]).toMatchObject({ type: "retry", attempt: 1, reason: "overloaded" });
    expect(events.at(-1)).toMatchObject({ type: "done" });
  });

  it("does not retry once content reached the caller (it would be repeated)", async () => {
    server.enqueue({
      kind: "stream-error",
      content: [{ type: "text", text: "partial answer" }],
      errorType: "overloaded_error",
      message: "Overloaded",
    });
    const events: ModelStreamEvent[] = [];
    const error = await failure(
      (async () => {
        for await (const event of client(2).stream(request())) events.push(event);
      })(),
    );
    expect(error).toMatchObject({ kind: "overloaded" });
    expect(events.some((e) => e.type === "retry")).toBe(false);
    expect(server.requests).toHaveLength(1);
  });

  it("stops waiting for a retry when aborted", async () => {
    server.enqueue({
      kind: "error",
      status: 429,
      errorType: "rate_limit_error",
      message: "slow down",
      headers: { "retry-after": "30" },
    });
    const controller = new AbortController();
    const run = (async () => {
      for await (const event of client(2).stream(request({ signal: controller.signal }))) {
        if (event.type === "retry") {
          expect(event.delayMs).toBe(30_000);
          controller.abort();
        }
      }
    })();
    expect(await failure(run)).toBeInstanceOf(AbortedError);
    expect(server.requests).toHaveLength(1);
  });

  it("maps a 529 that outlasts the SDK retries to an overloaded, transient error", async () => {
    server.enqueue({
      kind: "error",
      status: 529,
      errorType: "overloaded_error",
      message: "Overloaded",
    });
    const error = await failure(completeTurn(client(0), request()));
    expect(error).toBeInstanceOf(ModelApiError);
    expect(error).toMatchObject({ kind: "overloaded", status: 529, transient: true });
    expect((error as ModelApiError).exitCode).toBe(4);
  });

  it("maps 429 with retry-after to rate_limited and keeps the delay", async () => {
    server.enqueue({
      kind: "error",
      status: 429,
      errorType: "rate_limit_error",
      message: "Number of request tokens has exceeded your per-minute rate limit",
      headers: { "retry-after": "17" },
    });
    const error = await failure(completeTurn(client(0), request()));
    expect(error).toMatchObject({ kind: "rate_limited", retryAfterMs: 17_000 });
  });

  it("maps a spend-limit refusal to billing, which is not transient", async () => {
    server.enqueue({
      kind: "error",
      status: 400,
      errorType: "invalid_request_error",
      message: "Your credit balance is too low to access the Anthropic API.",
    });
    const error = await failure(completeTurn(client(0), request()));
    expect(error).toMatchObject({ kind: "billing", transient: false });
    expect((error as ModelApiError).fix).toMatch(/credit balance/);
  });

  it("maps a context-window 400 to context_overflow", async () => {
    server.enqueue({
      kind: "error",
      status: 400,
      errorType: "invalid_request_error",
      message: "prompt is too long: 210000 tokens > 200000 maximum",
    });
    const error = await failure(completeTurn(client(0), request()));
    expect(error).toMatchObject({ kind: "context_overflow", status: 400 });
  });

  it("maps other 400s to invalid_request and 401 to auth", async () => {
    server.enqueue(
      {
        kind: "error",
        status: 400,
        errorType: "invalid_request_error",
        message: "max_tokens: must be positive",
      },
      {
        kind: "error",
        status: 401,
        errorType: "authentication_error",
        message: "invalid x-api-key",
      },
    );
    expect(await failure(completeTurn(client(0), request()))).toMatchObject({
      kind: "invalid_request",
    });
    const auth = await failure(completeTurn(client(0), request()));
    expect(auth).toMatchObject({ kind: "auth", status: 401 });
    expect((auth as ModelApiError).fix).toMatch(/ANTHROPIC_API_KEY/);
  });

  it("maps an error event in the middle of the stream", async () => {
    server.enqueue({
      kind: "stream-error",
      content: [{ type: "text", text: "partial answer" }],
      errorType: "overloaded_error",
      message: "Overloaded",
    });
    const error = await failure(completeTurn(client(0), request()));
    expect(error).toMatchObject({ kind: "overloaded" });
  });

  it("maps an unreachable server to network", async () => {
    const dead = new AnthropicModelClient({
      apiKey: "k",
      baseURL: "http://127.0.0.1:1",
      maxRetries: 0,
    });
    expect(await failure(completeTurn(dead, request()))).toMatchObject({ kind: "network" });
  });

  it("stops the HTTP stream when aborted", async () => {
    server.enqueue({ kind: "hang" });
    const controller = new AbortController();
    const events: ModelStreamEvent[] = [];
    const disconnected = server.disconnected();
    const run = (async () => {
      for await (const event of client().stream(request({ signal: controller.signal }))) {
        events.push(event);
        if (event.type === "text-delta") controller.abort();
      }
    })();
    expect(await failure(run)).toBeInstanceOf(AbortedError);
    await disconnected;
    expect(events.some((e) => e.type === "done")).toBe(false);
  });

  it("needs a key, and reads settings only from the env map it is given", () => {
    expect(() => new AnthropicModelClient({})).toThrow(ModelApiError);
    expect(
      anthropicOptionsFromEnv({ ANTHROPIC_API_KEY: "k", ANTHROPIC_BASE_URL: "http://x" }),
    ).toEqual({ apiKey: "k", baseURL: "http://x" });
    expect(anthropicOptionsFromEnv({})).toEqual({});
  });
});
