import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";

import {
  startMessagesApiServer,
  type MessagesApiServer,
  type ScriptedResponse,
} from "../../../test/support/messages-api-server.js";
import { removeStateDirectory } from "../../../test/support/state-directory.js";
import { createModelClient } from "./create-model-client.js";
import { keyStatePath } from "./key-state-file.js";
import { ModelApiError } from "./model-errors.js";
import {
  completeTurn,
  type ModelClient,
  type ModelRequest,
  type ModelStreamEvent,
} from "./types.js";

let server: MessagesApiServer;
let home: string;

beforeAll(async () => {
  server = await startMessagesApiServer();
});
afterAll(async () => {
  await server.close();
});
beforeEach(async () => {
  server.requests.length = 0;
  home = await mkdtemp(path.join(tmpdir(), "cordon-rotating-"));
});
afterEach(async () => {
  await removeStateDirectory(home);
});

const request: ModelRequest = {
  model: "claude-test",
  system: "You are a test.",
  messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
  tools: [],
  maxTokens: 1000,
};
const answer = (text: string): ScriptedResponse => ({
  kind: "message",
  content: [{ type: "text", text }],
});
const refusal = (status: number, errorType: string): ScriptedResponse => ({
  kind: "error",
  status,
  errorType,
  message: `refused with ${status}`,
});

/** A fresh client over the same CORDON_HOME: what a second cordon process gets. */
function anotherProcess(): Promise<ModelClient> {
  return createModelClient({
    env: { ANTHROPIC_API_KEYS: "sk-first,sk-second", ANTHROPIC_BASE_URL: server.url },
    stateDir: home,
  });
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a failure");
}

describe("several API keys through the real SDK", () => {
  it("a 429 on the first key goes to the second at once; the next process starts with the second", async () => {
    server.enqueueForKey("sk-first", refusal(429, "rate_limit_error"));
    server.enqueue(answer("from the second key"));
    const events: ModelStreamEvent[] = [];
    for await (const event of (await anotherProcess()).stream(request)) events.push(event);
    expect(events.at(-1)).toMatchObject({
      type: "done",
      turn: { message: { content: [{ type: "text", text: "from the second key" }] } },
    });
    expect(server.requests.map((r) => r.apiKey)).toEqual(["sk-first", "sk-second"]);
    // Announced, with no wait: the rate-limited key is not waited for while another is free.
    const retries = events.filter((event) => event.type === "retry");
    expect(retries).toEqual([
      expect.objectContaining({ reason: "rate_limited", status: 429, delayMs: 0 }),
    ]);
    expect(JSON.stringify(retries)).toMatch(/trying key ANTHROPIC_API_KEYS#2 \([0-9a-f]{12}\)/);
    expect(JSON.stringify(retries)).not.toMatch(/sk-first|sk-second/);

    // Round-robin alone would now pick the first key (used longest ago); its cooldown says no.
    server.enqueue(answer("again"));
    await completeTurn(await anotherProcess(), request);
    expect(server.requests.map((r) => r.apiKey)).toEqual(["sk-first", "sk-second", "sk-second"]);

    const record = await readFile(keyStatePath(home), "utf8");
    expect(record).not.toContain("sk-first");
    expect(record).not.toContain("sk-second");
  });

  it("takes turns by last use when nothing fails", async () => {
    server.enqueue(answer("1"), answer("2"), answer("3"));
    for (let run = 0; run < 3; run++) await completeTurn(await anotherProcess(), request);
    expect(server.requests.map((r) => r.apiKey)).toEqual(["sk-first", "sk-second", "sk-first"]);
  });

  it("every key unauthorised: one error that says so, naming the keys by variable, never by value", async () => {
    server.enqueueForKey("sk-first", refusal(401, "authentication_error"));
    server.enqueueForKey("sk-second", refusal(401, "authentication_error"));
    const error = await failure(completeTurn(await anotherProcess(), request));
    expect(error).toBeInstanceOf(ModelApiError);
    const message = (error as ModelApiError).message;
    expect(message).toMatch(
      /^The model API rejected every API key: ANTHROPIC_API_KEYS#1 \([0-9a-f]{12}\), ANTHROPIC_API_KEYS#2 \([0-9a-f]{12}\)\.$/,
    );
    expect((error as ModelApiError).kind).toBe("auth");
    expect(`${message} ${(error as ModelApiError).fix}`).not.toMatch(/sk-first|sk-second/);
  });

  it("a server error is not the key's fault: it is retried with the same key", async () => {
    server.enqueue(
      {
        kind: "error",
        status: 500,
        errorType: "api_error",
        message: "Internal server error",
        headers: { "retry-after-ms": "10" },
      },
      answer("second try"),
    );
    const turn = await completeTurn(await anotherProcess(), request);
    expect(turn.message.content).toEqual([{ type: "text", text: "second try" }]);
    expect(server.requests.map((r) => r.apiKey)).toEqual(["sk-first", "sk-first"]);
  });

  it("an answer that already began streaming is never sent again with another key", async () => {
    server.enqueue({
      kind: "stream-error",
      content: [{ type: "text", text: "half" }],
      errorType: "overloaded_error",
      message: "Overloaded",
    });
    const error = await failure(completeTurn(await anotherProcess(), request));
    expect((error as ModelApiError).kind).toBe("overloaded");
    expect(server.requests).toHaveLength(1);
  });
});
