import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { createSilentLogger } from "../common/index.js";
import { createRunner, sessionFiles, type SandboxProvider } from "../runner/index.js";
import { MemorySandbox } from "../tools/testing/index.js";
import { createMcpServer } from "./mcp-server.js";
import { McpSession } from "./mcp-session.js";

function textOf(result: unknown): string {
  return (result as CallToolResult).content
    .map((block) => (block.type === "text" ? block.text : ""))
    .join("");
}

describe("the MCP server over one session", () => {
  let root: string;
  let sandbox: MemorySandbox;
  let acquired: number;
  let released: number;

  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-mcp-unit-"));
    acquired = 0;
    released = 0;
    sandbox = new MemorySandbox({
      files: { "README.md": "hello\n" },
      // A command that runs until it is cancelled, as `sleep` would.
      exec: (command, options) =>
        command.startsWith("sleep")
          ? new Promise((resolve) => {
              options.signal?.addEventListener("abort", () => resolve({ exitCode: 137 }), {
                once: true,
              });
            })
          : { exitCode: 0, stdout: `ran: ${command}\n` },
    });
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  async function connect(allowTools?: string[]) {
    const sandboxes: SandboxProvider = {
      acquire: () => {
        acquired += 1;
        return Promise.resolve({
          sandbox,
          fresh: true,
          release: () => {
            released += 1;
            return Promise.resolve();
          },
        });
      },
    };
    const runner = createRunner({
      cwd: root,
      env: { CORDON_HOME: path.join(root, "home"), CORDON_CONFIG: "" },
      sandboxes,
    });
    const session = new McpSession({
      runner,
      request: { sessionKey: "mcp-unit", allowTools },
      logger: createSilentLogger(),
      reviewFlags: "--session mcp-unit",
    });
    const server = createMcpServer({ session, version: "9.9.9" });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    server.onclose = () => void session.close();
    await server.connect(serverSide);
    const client = new Client({ name: "unit-client", version: "0.1" });
    await client.connect(clientSide);
    return { client, session, runner };
  }

  it("lists the allowed tools only and acquires no sandbox to do so", async () => {
    const { client } = await connect(["read", "ls"]);
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(["read", "ls", "explain", "diff"]);
    expect(tools[0]?.annotations?.readOnlyHint).toBe(true);
    expect(acquired).toBe(0);
    await client.close();
  });

  it("refuses a tool the policy leaves out, before any sandbox starts", async () => {
    const { client } = await connect(["read"]);
    const result = await client.callTool({ name: "exec", arguments: { command: "ls" } });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/not allowed.*--allow-tools/s);
    expect(acquired).toBe(0);
    await client.close();
  });

  it("runs calls in one sandbox, acquired once, released when the client goes", async () => {
    const { client, runner } = await connect();
    const write = await client.callTool({
      name: "write",
      arguments: { path: "a.txt", content: "from the client\n" },
    });
    expect(write.isError).toBeFalsy();
    expect(textOf(await client.callTool({ name: "read", arguments: { path: "a.txt" } }))).toContain(
      "from the client",
    );
    expect(
      textOf(await client.callTool({ name: "exec", arguments: { command: "make" } })),
    ).toContain("ran: make");
    expect(acquired).toBe(1);
    await client.close();
    await expect.poll(() => released).toBe(1);

    const plan = await runner.plan({ sessionKey: "mcp-unit" });
    const events = sessionFiles(runner.stateDir, plan.sessionKey, plan.agent.workspaceId).events;
    const records = (await readFile(events, "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(records[0]).toMatchObject({ type: "run-start", client: "unit-client 0.1" });
    expect(records.filter((r) => r["type"] === "tool-call").map((r) => r["name"])).toEqual([
      "write",
      "read",
      "exec",
    ]);
    expect(records.at(-1)).toMatchObject({ type: "run-end", status: "completed" });
  });

  it("reports progress on a long call and stops its command when the client cancels", async () => {
    const { client } = await connect();
    const cancel = new AbortController();
    const messages: string[] = [];
    const call = client.callTool({ name: "exec", arguments: { command: "sleep 600" } }, undefined, {
      signal: cancel.signal,
      onprogress: (progress) => {
        messages.push(progress.message ?? "");
        cancel.abort();
      },
    });
    await expect(call).rejects.toThrow();
    expect(messages[0]).toMatch(/^exec running \(1 s\)$/);
    const execCall = sandbox.calls.find((recorded) => recorded.method === "exec");
    const options = execCall?.args[1] as { signal?: AbortSignal } | undefined;
    await expect.poll(() => options?.signal?.aborted).toBe(true);
    await client.close();
  });

  it("explains the plan with the review commands, and has no apply tool", async () => {
    const { client } = await connect();
    const explain = textOf(await client.callTool({ name: "explain", arguments: {} }));
    expect(explain).toContain("cordon diff --session mcp-unit");
    expect(explain).toContain("session   agent:main:mcp-unit");
    const apply = await client.callTool({ name: "apply", arguments: {} });
    expect(apply.isError).toBe(true);
    expect(client.getInstructions()).toMatch(/no apply tool.*cordon diff.*cordon apply/s);
    await client.close();
  });
});
