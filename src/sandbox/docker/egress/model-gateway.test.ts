import { createServer as createHttpServer, type IncomingHttpHeaders } from "node:http";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";

import Anthropic from "@anthropic-ai/sdk";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

import {
  startMessagesApiServer,
  type MessagesApiServer,
} from "../../../../test/support/messages-api-server.js";
import {
  createModelGateway,
  type ModelGateway,
  type ModelGatewayCall,
  type ModelGatewayOptions,
} from "./model-gateway.js";

const realKey = "sk-ant-real-key-that-stays-on-the-host";

/**
 * The gateway listens nowhere: in a sandbox its connections are channels of a forwarded port.
 * Here a loopback server hands it each TCP connection the same way.
 */
async function startGateway(options: ModelGatewayOptions): Promise<ModelGateway & { url: string }> {
  const gateway = createModelGateway(options);
  const server = createServer((socket) => gateway.accept(socket));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    placeholderKey: gateway.placeholderKey,
    accept: (connection) => gateway.accept(connection),
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      await gateway.close();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe("model gateway", () => {
  let server: MessagesApiServer;
  let gateway: ModelGateway & { url: string };
  let calls: ModelGatewayCall[];

  beforeEach(async () => {
    server = await startMessagesApiServer();
    calls = [];
    gateway = await startGateway({
      upstream: server.url,
      credential: { apiKey: realKey },
      onCall: (call) => calls.push(call),
    });
  });
  afterEach(async () => {
    await gateway.close();
    await server.close();
  });

  it("streams a Messages call through with the real key in place of the placeholder", async () => {
    server.enqueue({
      kind: "message",
      content: [{ type: "text", text: "hello from upstream" }],
      usage: { input_tokens: 42, output_tokens: 7 },
    });
    const client = new Anthropic({ baseURL: gateway.url, apiKey: gateway.placeholderKey });
    const message = await client.messages
      .stream({
        model: "claude-test",
        max_tokens: 100,
        messages: [{ role: "user", content: "hi" }],
      })
      .finalMessage();

    expect(message.content).toEqual([
      expect.objectContaining({ type: "text", text: "hello from upstream" }),
    ]);
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]?.headers["x-api-key"]).toBe(realKey);
    expect(JSON.stringify(server.requests[0]?.headers)).not.toContain(gateway.placeholderKey);
    expect(calls).toEqual([
      {
        method: "POST",
        path: "/v1/messages",
        model: "claude-test",
        status: 200,
        inputTokens: 42,
        outputTokens: 7,
      },
    ]);
  });

  it("streams as the upstream sends (not buffered), and a client that goes away ends the upstream call", async () => {
    server.enqueue({ kind: "hang" });
    const disconnected = server.disconnected();
    const abort = new AbortController();
    const response = await fetch(`${gateway.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": gateway.placeholderKey, "content-type": "application/json" },
      body: JSON.stringify({ model: "claude-test", max_tokens: 1, stream: true, messages: [] }),
      signal: abort.signal,
    });
    expect(response.status).toBe(200);
    // The upstream never finishes this answer: its first delta arriving means nothing waits for the end.
    const decoder = new TextDecoder();
    let seen = "";
    for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
      seen += decoder.decode(chunk, { stream: true });
      if (seen.includes("thinking about it")) break;
    }
    expect(seen).toContain("thinking about it");
    abort.abort();
    await disconnected;
  });

  it("refuses a call without this run's placeholder key, and never forwards it", async () => {
    const response = await fetch(`${gateway.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": "cordon-gateway-guessed", "content-type": "application/json" },
      body: JSON.stringify({ model: "m", max_tokens: 1, messages: [] }),
    });
    expect(response.status).toBe(401);
    expect(server.requests).toHaveLength(0);
    expect(calls[0]).toMatchObject({
      status: 401,
      refused: expect.stringContaining("placeholder") as string,
    });
  });

  it("refuses every path but the Messages API with 403", async () => {
    for (const [method, path] of [
      ["GET", "/v1/models"],
      ["POST", "/v1/files"],
      ["POST", "/v1/messages/batches"],
      ["GET", "/v1/messages"],
      ["POST", "/v1/../v1/organizations/keys"],
    ] as const) {
      const response = await fetch(`${gateway.url}${path}`, {
        method,
        headers: { "x-api-key": gateway.placeholderKey },
        ...(method === "POST" ? { body: "{}" } : {}),
      });
      expect(response.status, `${method} ${path}`).toBe(403);
    }
    expect(server.requests).toHaveLength(0);
  });

  it("a call the upstream never answers is a 502 to the agent and an event naming the upstream and why", async () => {
    // A port that was just free: nothing listens there, so the connection is refused.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const deadUpstream = await startGateway({
      upstream: `http://127.0.0.1:${port}`,
      credential: { apiKey: realKey },
      onCall: (call) => calls.push(call),
    });
    try {
      const response = await fetch(`${deadUpstream.url}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": deadUpstream.placeholderKey, "content-type": "application/json" },
        body: JSON.stringify({ model: "claude-test", max_tokens: 1, messages: [] }),
      });
      expect(response.status).toBe(502);
      expect(calls).toEqual([
        {
          method: "POST",
          path: "/v1/messages",
          model: "claude-test",
          status: 502,
          failed: expect.stringMatching(
            new RegExp(`^http://127\\.0\\.0\\.1:${port}: .*ECONNREFUSED`),
          ) as unknown,
        },
      ]);
    } finally {
      await deadUpstream.close();
    }
  });

  it.each([301, 302, 307])(
    "an upstream answering %i is a 502 naming its Location, and the key never reaches the other server",
    async (status) => {
      const elsewhere: IncomingHttpHeaders[] = [];
      const other = createHttpServer((request, response) => {
        elsewhere.push(request.headers);
        request.resume();
        response.end("{}");
      });
      const redirecting = createHttpServer((request, response) => {
        request.resume();
        response.writeHead(status, { location: `${urlOf(other)}/v1/messages` });
        response.end();
      });
      await Promise.all([listen(other), listen(redirecting)]);
      const gatewayToRedirect = await startGateway({
        upstream: urlOf(redirecting),
        credential: { apiKey: realKey },
        onCall: (call) => calls.push(call),
      });
      try {
        const response = await fetch(`${gatewayToRedirect.url}/v1/messages`, {
          method: "POST",
          headers: {
            "x-api-key": gatewayToRedirect.placeholderKey,
            "content-type": "application/json",
          },
          body: JSON.stringify({ model: "claude-test", max_tokens: 1, messages: [] }),
        });
        expect(response.status).toBe(502);
        const location = `${urlOf(other)}/v1/messages`;
        expect(JSON.stringify(await response.json())).toContain(location);
        expect(elsewhere).toEqual([]);
        expect(calls).toEqual([
          {
            method: "POST",
            path: "/v1/messages",
            model: "claude-test",
            status: 502,
            failed: expect.stringContaining(`answered ${status} to "${location}"`) as unknown,
          },
        ]);
      } finally {
        await gatewayToRedirect.close();
        await Promise.all([close(other), close(redirecting)]);
      }
    },
  );

  it("passes the upstream's error status and body through", async () => {
    server.enqueue({
      kind: "error",
      status: 429,
      errorType: "rate_limit_error",
      message: "slow down",
    });
    const response = await fetch(`${gateway.url}/v1/messages?beta=true`, {
      method: "POST",
      headers: { "x-api-key": gateway.placeholderKey, "content-type": "application/json" },
      body: JSON.stringify({ model: "claude-test", max_tokens: 1, messages: [] }),
    });
    expect(response.status).toBe(429);
    expect(await response.json()).toMatchObject({ error: { message: "slow down" } });
    expect(server.requests[0]?.path).toBe("/v1/messages?beta=true");
    expect(calls[0]).toMatchObject({ status: 429, model: "claude-test" });
  });
});

function listen(server: ReturnType<typeof createHttpServer>): Promise<void> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
}

function close(server: ReturnType<typeof createHttpServer>): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

function urlOf(server: ReturnType<typeof createHttpServer>): string {
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
