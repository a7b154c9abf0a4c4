/**
 * `cordon mcp` over stdio, driven by the MCP SDK's own client against the built CLI and a real
 * sandbox: the client gets exactly the session's allowed tools, its calls run in the session's
 * container on a private copy, a refused tool and a cancelled command behave as in a run, and the
 * person reviews the result with `cordon diff` while the repository stays untouched.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { mcpToolDefinitions } from "../../src/mcp/index.js";
import { toModelToolSpec } from "../../src/tools/index.js";
import { demoRepo, git } from "../support/demo-repo.js";
import { requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { builtCli } from "../support/spawn-cordon.js";
import { removeStateDirectory } from "../support/state-directory.js";

function textOf(result: unknown): string {
  const { content } = result as CallToolResult;
  return content.map((block) => (block.type === "text" ? block.text : `[${block.type}]`)).join("");
}

describe("cordon mcp over stdio, with the SDK's client", () => {
  let repo: string;
  let home: string;
  let stderr = "";
  const session = "mcp-stdio-test";
  const env = (): Record<string, string> => ({
    ...(process.env as Record<string, string>),
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    CORDON_LOG_LEVEL: "silent",
  });
  const cli = (...args: string[]) =>
    runCordon([...args, "--workspace", repo], { CORDON_HOME: home, CORDON_CONFIG: "" });

  async function connect(args: string[]): Promise<Client> {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [builtCli, "mcp", ...args],
      cwd: repo,
      env: env(),
      stderr: "pipe",
    });
    transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    const client = new Client({ name: "cordon-test-client", version: "1.2.3" });
    await client.connect(transport);
    return client;
  }

  beforeAll(async () => {
    await requireSandboxImage();
    repo = await demoRepo();
    home = await mkdtemp(path.join(tmpdir(), "cordon-mcp-home-"));
  });

  afterAll(async () => {
    if (!home) return;
    await runCordon(["sandbox", "rm", "--all", "--discard-changes"], { CORDON_HOME: home });
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("offers the allowed tools, runs them in the sandbox, refuses and cancels as a run does", async () => {
    const client = await connect(["--session", session, "--deny-tools", "process"]);
    try {
      expect(client.getInstructions()).toContain("cordon apply");
      expect(client.getServerVersion()?.name).toBe("cordon");

      // The policy's tools with the very schemas an agent run offers; the denied one is absent.
      const { tools } = await client.listTools();
      const names = tools.map((tool) => tool.name);
      expect(names).toEqual([
        "exec",
        "read",
        "write",
        "edit",
        "apply_patch",
        "ls",
        "find",
        "grep",
        "explain",
        "diff",
      ]);
      expect(names).not.toContain("apply");
      const execSpec = toModelToolSpec(mcpToolDefinitions.find((tool) => tool.name === "exec")!);
      expect(tools[0]?.inputSchema).toEqual({ type: "object", ...execSpec.inputSchema });

      // Calls run inside the container, on the private copy.
      const exec = await client.callTool({
        name: "exec",
        arguments: { command: "pwd; id -u; test -f pricing.py && echo seeded" },
      });
      expect(exec.isError).toBeFalsy();
      expect(textOf(exec)).toContain("/workspace");
      expect(textOf(exec)).toContain("seeded");
      const write = await client.callTool({
        name: "write",
        arguments: { path: "notes/from-mcp.txt", content: "written through MCP\n" },
      });
      expect(write.isError).toBeFalsy();
      const read = await client.callTool({
        name: "read",
        arguments: { path: "notes/from-mcp.txt" },
      });
      expect(textOf(read)).toContain("written through MCP");

      // A denied tool is refused with the key that blocks it; an unknown one names what exists.
      const refused = await client.callTool({
        name: "process",
        arguments: { action: "list" },
      });
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toMatch(/not allowed.*--deny-tools/s);
      const invalid = await client.callTool({ name: "exec", arguments: { command: 7 } });
      expect(invalid.isError).toBe(true);
      expect(textOf(invalid)).toContain("nothing was run");

      // explain and diff read; diff shows the written file with the hash apply will check.
      expect(textOf(await client.callTool({ name: "explain", arguments: {} }))).toContain(
        `session   agent:main:${session}`,
      );
      const diff = textOf(await client.callTool({ name: "diff", arguments: {} }));
      expect(diff).toMatch(/1 changed file, sha256 [0-9a-f]{64}/);
      expect(diff).toContain("+written through MCP");
      const resources = await client.listResources();
      expect(resources.resources.map((resource) => resource.uri)).toEqual([
        "cordon://session/plan",
        "cordon://session/changes",
      ]);

      // `cordon ps` shows the session held by this client.
      const ps = await runCordon(["ps", "--json"], { CORDON_HOME: home });
      const runs = JSON.parse(ps.stdout) as {
        sessionKey: string;
        client?: string;
        doing: string;
      }[];
      expect(runs).toEqual([
        expect.objectContaining({
          sessionKey: `agent:main:${session}`,
          client: "cordon-test-client 1.2.3",
        }),
      ]);

      // A long command reports progress, its output's last line among it; cancelling it kills
      // its process tree in the sandbox. The line that cancels it comes after the marker and the
      // background sleep were started: a kill that arrived before `touch` ran killed it too
      // (seen in CI), and a tree with nothing in it yet would prove nothing.
      const cancel = new AbortController();
      const progress: string[] = [];
      const long = client.callTool(
        {
          name: "exec",
          arguments: {
            command:
              "touch /tmp/long-started; sleep 300 & echo long-is-under-way; sleep 301; echo never",
          },
        },
        undefined,
        {
          signal: cancel.signal,
          onprogress: (update) => {
            progress.push(update.message ?? "");
            if (update.message?.includes("long-is-under-way")) cancel.abort();
          },
        },
      );
      await expect(long).rejects.toThrow();
      expect(progress[0]).toMatch(/exec/);
      expect(progress.at(-1)).toMatch(/^exec: long-is-under-way/);
      let left = "";
      for (let attempt = 0; attempt < 40; attempt += 1) {
        left = textOf(
          await client.callTool({
            name: "exec",
            // The pattern cannot match this command line itself (its "[").
            arguments: { command: "pgrep -f 'sleep 30[01]' || echo none" },
          }),
        );
        if (left.includes("none")) break;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      expect(left).toContain("none");
      const marker = await client.callTool({
        name: "exec",
        arguments: { command: "ls /tmp/long-started" },
      });
      expect(marker.isError).toBeFalsy();
    } finally {
      await client.close();
    }

    // The client is gone: the session is let go, the sandbox kept with the work for review.
    await expect
      .poll(async () => (await runCordon(["ps", "--json"], { CORDON_HOME: home })).stdout, {
        timeout: 15_000,
      })
      .toBe("[]\n");
    const review = await cli("diff", "--session", session);
    expect(review.exitCode).toBe(0);
    expect(review.stdout).toContain("notes/from-mcp.txt");
    expect(review.stdout).toContain("+written through MCP");
    await expect(readFile(path.join(repo, "notes", "from-mcp.txt"))).rejects.toThrow();
    expect(git(repo, "status", "--porcelain")).toBe("");

    // Every call is in the session's events, as a run's are.
    const logs = await cli("logs", "--session", session, "--json");
    const records = logs.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string; name?: string });
    expect(records[0]?.type).toBe("run-start");
    expect(records.filter((record) => record.type === "tool-call").map((r) => r.name)).toEqual(
      expect.arrayContaining(["exec", "write", "read", "process"]),
    );
    expect(records.at(-1)?.type).toBe("run-end");
    expect(stderr).toContain(`cordon diff --session ${session}`);
  });

  it("refuses a second client of a busy session with --no-wait; --rm removes the sandbox at the end", async () => {
    const first = await connect(["--session", "mcp-shared", "--rm"]);
    try {
      const ran = await first.callTool({ name: "exec", arguments: { command: "echo one" } });
      expect(textOf(ran)).toContain("one");
      const second = await connect(["--session", "mcp-shared", "--no-wait"]);
      try {
        const busy = await second.callTool({ name: "exec", arguments: { command: "echo two" } });
        expect(busy.isError).toBe(true);
        expect(textOf(busy)).toMatch(
          /exec was not run: Session agent:main:mcp-shared is in use by another run/,
        );
      } finally {
        await second.close();
      }
    } finally {
      await first.close();
    }
    await expect
      .poll(
        async () => {
          const list = await runCordon(["sandbox", "list", "--json"], { CORDON_HOME: home });
          const { sandboxes } = JSON.parse(list.stdout) as { sandboxes: { session: string }[] };
          return sandboxes.map((s) => s.session);
        },
        { timeout: 30_000 },
      )
      .not.toContain("agent:main:mcp-shared");
  });
});
