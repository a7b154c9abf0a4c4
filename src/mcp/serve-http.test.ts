import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { createSilentLogger } from "../common/index.js";
import { createRunner, type SandboxProvider } from "../runner/index.js";
import { MemorySandbox } from "../tools/testing/index.js";
import { McpSession } from "./mcp-session.js";
import { serveHttp } from "./serve-http.js";

const token = "a-test-token-of-enough-length";

describe("serveHttp: an idle client's session is closed", () => {
  let root: string;
  let stop: AbortController;
  let served: Promise<void>;
  let released: number;
  let idleClosed: McpSession[];

  async function start(idleTimeoutMs: number): Promise<string> {
    const sandbox = new MemorySandbox({
      // `sleep` runs until it is cancelled; anything else answers at once.
      exec: (command, options) =>
        command.startsWith("sleep")
          ? new Promise((resolve) => {
              options.signal?.addEventListener("abort", () => resolve({ exitCode: 137 }), {
                once: true,
              });
            })
          : { exitCode: 0, stdout: "ok\n" },
    });
    const sandboxes: SandboxProvider = {
      acquire: () =>
        Promise.resolve({
          sandbox,
          fresh: true,
          release: () => {
            released += 1;
            return Promise.resolve();
          },
        }),
    };
    const runner = createRunner({
      cwd: root,
      env: { CORDON_HOME: path.join(root, "home"), CORDON_CONFIG: "" },
      sandboxes,
    });
    let url = "";
    let count = 0;
    served = serveHttp({
      listen: { host: "127.0.0.1", port: 0 },
      token,
      version: "0.0.0",
      logger: createSilentLogger(),
      signal: stop.signal,
      idleTimeoutMs,
      onIdleClose: (session) => idleClosed.push(session),
      newSession: () =>
        new McpSession({
          runner,
          request: { sessionKey: `idle-${(count += 1)}` },
          logger: createSilentLogger(),
          reviewFlags: "--session idle",
        }),
      onListening: (listening) => (url = listening),
    });
    await expect.poll(() => url, { timeout: 10_000 }).not.toBe("");
    return url;
  }

  async function connect(url: string): Promise<Client> {
    const client = new Client({ name: "idle-test", version: "1" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    return client;
  }

  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-mcp-idle-"));
    stop = new AbortController();
    released = 0;
    idleClosed = [];
  });

  afterEach(async () => {
    stop.abort();
    await served;
    await rm(root, { recursive: true, force: true });
  });

  it("releases the sandbox of a session nobody uses, and says so to a client that comes back", async () => {
    const url = await start(300);
    const client = await connect(url);
    const ran = await client.callTool({ name: "exec", arguments: { command: "echo hi" } });
    expect(ran.isError).toBeFalsy();
    await expect.poll(() => idleClosed.length, { timeout: 15_000 }).toBe(1);
    await expect.poll(() => released, { timeout: 15_000 }).toBe(1);
    await expect(client.listTools()).rejects.toThrow(/idle too long/);
    await client.close().catch(() => undefined);
  });

  it("never closes a session while a call is in flight", async () => {
    const url = await start(200);
    const client = await connect(url);
    const cancel = new AbortController();
    const long = client.callTool({ name: "exec", arguments: { command: "sleep 600" } }, undefined, {
      signal: cancel.signal,
      timeout: 60_000,
    });
    long.catch(() => undefined);
    // Many idle periods pass while the call runs: the session stays.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(idleClosed).toEqual([]);
    expect(released).toBe(0);
    cancel.abort();
    await expect(long).rejects.toThrow();
    // Once it is answered, the clock runs again.
    await expect.poll(() => idleClosed.length, { timeout: 15_000 }).toBe(1);
    await client.close().catch(() => undefined);
  });

  it("keeps a session that is used", async () => {
    const url = await start(2000);
    const client = await connect(url);
    for (let i = 0; i < 6; i += 1) {
      await client.listTools();
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    expect(idleClosed).toEqual([]);
    await client.close();
  });
});
