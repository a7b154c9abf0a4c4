/**
 * `cordon mcp --http`: the built CLI serving streamable HTTP on loopback, attacked and used. A
 * request without the token is refused (401), one from a foreign Origin or for a foreign Host is
 * refused (403: DNS rebinding), and two SDK clients with the token each get a session of their
 * own, whose changes `cordon diff` shows apart.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { request } from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { demoRepo, git } from "../support/demo-repo.js";
import { requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { builtCli } from "../support/spawn-cordon.js";
import { removeStateDirectory } from "../support/state-directory.js";

function textOf(result: unknown): string {
  return (result as CallToolResult).content
    .map((block) => (block.type === "text" ? block.text : ""))
    .join("");
}

const initialize = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "raw", version: "0" },
  },
});

/** A POST with exactly these headers (fetch would not let a test set Host). */
function post(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
      },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on("error", reject);
    req.end(initialize);
  });
}

describe("cordon mcp --http", () => {
  let repo: string;
  let home: string;
  let server: ChildProcess | undefined;
  let url = "";
  let token = "";
  let stderr = "";

  beforeAll(async () => {
    await requireSandboxImage();
    repo = await demoRepo();
    home = await mkdtemp(path.join(tmpdir(), "cordon-mcp-http-"));
    server = spawn(process.execPath, [builtCli, "mcp", "--http", "127.0.0.1:0"], {
      cwd: repo,
      env: { ...process.env, CORDON_HOME: home, CORDON_CONFIG: "", CORDON_LOG_LEVEL: "silent" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    server.stderr?.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    // Its stderr says where it listens and the token, once it is up.
    const started = Date.now();
    while (!(/bearer token .*: (\S+)\n/.test(stderr) && /serving (\S+)\n/.test(stderr))) {
      if (Date.now() - started > 30_000 || server.exitCode !== null) {
        throw new Error(`cordon mcp --http did not start:\n${stderr}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    url = /serving (\S+)\n/.exec(stderr)?.[1] ?? "";
    token = /bearer token .*: (\S+)\n/.exec(stderr)?.[1] ?? "";
  });

  afterAll(async () => {
    if (server?.exitCode === null) {
      server.kill("SIGKILL");
    }
    if (!home) return;
    await runCordon(["sandbox", "rm", "--all", "--discard-changes"], { CORDON_HOME: home });
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("listens on loopback and prints a token", () => {
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    expect(token.length).toBeGreaterThanOrEqual(32);
  });

  it("refuses a request without the token (401), and a foreign Origin or Host (403)", async () => {
    const port = new URL(url).port;
    expect(await post(url, {})).toBe(401);
    expect(await post(url, { authorization: "Bearer not-the-token" })).toBe(401);
    const bearer = { authorization: `Bearer ${token}` };
    expect(await post(url, { ...bearer, origin: "http://evil.example" })).toBe(403);
    expect(await post(url, { ...bearer, origin: `http://attacker.example:${port}` })).toBe(403);
    // A rebound name resolves to 127.0.0.1, but the browser still sends it as the Host.
    expect(await post(url, { ...bearer, host: `attacker.example:${port}` })).toBe(403);
    // With the token, from loopback, the same request is answered.
    expect(await post(url, { ...bearer, origin: `http://localhost:${port}` })).toBe(200);
  });

  it("gives two clients a session each; diff shows each one's work apart", async () => {
    const connect = async (name: string): Promise<Client> => {
      const client = new Client({ name, version: "1.0" });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(url), {
          requestInit: { headers: { authorization: `Bearer ${token}` } },
        }),
      );
      return client;
    };
    const [first, second] = await Promise.all([connect("first"), connect("second")]);
    const tools = (await first.listTools()).tools.map((tool) => tool.name);
    expect(tools).toContain("exec");
    expect(tools).not.toContain("apply");
    await Promise.all([
      first.callTool({ name: "write", arguments: { path: "first.txt", content: "one\n" } }),
      second.callTool({ name: "write", arguments: { path: "second.txt", content: "two\n" } }),
    ]);
    const seen = await second.callTool({ name: "exec", arguments: { command: "ls *.txt" } });
    expect(textOf(seen)).toContain("second.txt");
    expect(textOf(seen)).not.toContain("first.txt");

    const ps = JSON.parse((await runCordon(["ps", "--json"], { CORDON_HOME: home })).stdout) as {
      sessionKey: string;
      client?: string;
    }[];
    expect(ps.map((run) => run.client).sort()).toEqual(["first 1.0", "second 1.0"]);
    const sessions = ps.map((run) => run.sessionKey.replace(/^agent:main:/, ""));
    expect(sessions.every((name) => /^mcp-[0-9a-f]{6}$/.test(name))).toBe(true);

    // The client ends its MCP session (DELETE): its cordon session is let go, the work kept.
    for (const client of [first, second]) {
      await (client.transport as StreamableHTTPClientTransport).terminateSession();
      await client.close();
    }
    await expect
      .poll(async () => (await runCordon(["ps", "--json"], { CORDON_HOME: home })).stdout, {
        timeout: 15_000,
      })
      .toBe("[]\n");
    const diffs = await Promise.all(
      ps.map((run) =>
        runCordon(["diff", "--stat", "--workspace", repo, "--session", run.sessionKey], {
          CORDON_HOME: home,
          CORDON_CONFIG: "",
        }),
      ),
    );
    const byClient: Record<string, string> = Object.fromEntries(
      ps.map((run, i): [string, string] => [run.client ?? "", diffs[i]?.stdout ?? ""]),
    );
    expect(byClient["first 1.0"]).toContain("first.txt");
    expect(byClient["first 1.0"]).not.toContain("second.txt");
    expect(byClient["second 1.0"]).toContain("second.txt");
    expect(git(repo, "status", "--porcelain")).toBe("");
  });

  it("stops on SIGTERM", async () => {
    server?.kill("SIGTERM");
    await expect.poll(() => server?.exitCode, { timeout: 20_000 }).not.toBeNull();
  });
});
