import { execFile } from "node:child_process";
import { access, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

import { packageRoot } from "../../src/common/index.js";
import { createRunner } from "../../src/runner/index.js";
import { releaseWorkspaceDisksBelow } from "../../src/sandbox/index.js";
import { BenchSetupError, benchConfig, type BenchContext } from "../context.js";
import { compare, time, timeInTurns } from "../measure.js";
import { withTarget, type FigureResult } from "../report.js";
import { FailureCount, execOk } from "./failures.js";

const run = promisify(execFile);

/** Issue 27's budget: an MCP call costs at most 1.2× the same call in-process, plus 2 ms. */
const budgetRatio = 1.2;
const budgetExtraMs = 2;

function textOf(result: CallToolResult): string {
  return result.content.map((block) => (block.type === "text" ? block.text : "")).join("");
}

/**
 * What serving a tool over MCP costs: `exec true` through the built `cordon mcp` over stdio (the
 * SDK's client, as Claude Code would start it; JSON-RPC both ways, the session's events log),
 * against the same call through `runner.callTool` (what `cordon tool` runs once its process is
 * up), in turns on one warm sandbox; and against `cordon tool` itself, a process per call, as a
 * script would drive a sandbox without MCP. The server is the built CLI (dist/), started with its
 * own CORDON_HOME and the bench's configuration; its container is removed here by name.
 */
export async function mcpFigure(ctx: BenchContext): Promise<FigureResult> {
  const runs = ctx.quick ? 10 : 100;
  const cliRuns = ctx.quick ? 3 : 10;
  const cli = path.join(packageRoot(), "dist", "cli", "main.js");
  await access(cli).catch(() => {
    throw new BenchSetupError(`${cli} is missing; build it with \`npm run build\``);
  });
  const failures = new FailureCount();
  const root = await mkdtemp(path.join(tmpdir(), "cordon-bench-mcp-"));
  const home = path.join(root, "home");
  const config = path.join(root, "cordon.json5");
  await writeFile(config, JSON.stringify(benchConfig()));
  const env = { CORDON_HOME: home, CORDON_CONFIG: config };
  const session = ctx.sessionKey("mcp");
  const runner = createRunner({ cwd: ctx.workspace, env, workspace: ctx.workspace });
  const container = (await runner.plan({ sessionKey: session })).sandbox.spec?.containerName;
  if (!container) throw new Error("the bench plan is not sandboxed");
  const client = new Client({ name: "cordon-bench", version: "1" });
  try {
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [cli, "mcp", "--session", session, "--workspace", ctx.workspace],
        cwd: ctx.workspace,
        env: { ...(process.env as Record<string, string>), ...env, CORDON_LOG_LEVEL: "silent" },
        stderr: "ignore",
      }),
    );
    const viaMcp = async (command: string): Promise<string> => {
      const result = (await client.callTool({
        name: "exec",
        arguments: { command },
      })) as CallToolResult;
      if (result.isError) throw new Error(`mcp exec ${command}: ${textOf(result)}`);
      return textOf(result);
    };
    const viaLibrary = async (command: string): Promise<string> => {
      const result = await runner.callTool(
        "exec",
        { command },
        { sessionKey: session, signal: ctx.signal },
      );
      const text = result.content.map((block) => (block.type === "text" ? block.text : ""));
      if (result.isError) throw new Error(`callTool exec ${command}: ${text.join("")}`);
      return text.join("");
    };
    // Both reach the one container the plan names (the first MCP call creates it).
    const [mcpHost, libraryHost] = [await viaMcp("hostname"), await viaLibrary("hostname")];
    if (mcpHost.split("\n")[0] !== libraryHost.split("\n")[0]) {
      throw new Error(`MCP and callTool reached different sandboxes: ${mcpHost} / ${libraryHost}`);
    }

    ctx.progress(
      `mcp: ${runs} exec calls each over MCP (stdio), through runner.callTool and the sandbox's exec`,
    );
    // The floor: the sandbox's own exec on a lease held throughout, no tool layer at all.
    const held = await runner.acquireSandbox({ sessionKey: session, signal: ctx.signal });
    let timings;
    try {
      timings = await timeInTurns(
        {
          mcp: () => failures.guard(() => viaMcp("true")),
          library: () => failures.guard(() => viaLibrary("true")),
          raw: () => failures.guard(() => execOk(held.lease.sandbox, "true", ctx.signal)),
        },
        runs,
        3,
      );
    } finally {
      await held.lease.release();
    }
    ctx.progress(`mcp: ${cliRuns} runs of \`cordon tool exec\``);
    const toolCli = await time(
      () =>
        failures.guard(() =>
          run(
            process.execPath,
            [
              cli,
              "tool",
              "exec",
              "--input",
              '{"command":"true"}',
              "--session",
              session,
              "--workspace",
              ctx.workspace,
            ],
            {
              cwd: ctx.workspace,
              env: { ...process.env, ...env, CORDON_LOG_LEVEL: "silent" },
              signal: ctx.signal,
            },
          ),
        ),
      cliRuns,
      1,
    );
    const allowed = budgetRatio + budgetExtraMs / timings.library.medianMs;
    return {
      name: "mcp",
      title: "an MCP tool call (stdio, warm sandbox)",
      comparisons: [
        withTarget(
          {
            measures: "exec true over MCP",
            ...compare(timings.mcp, timings.library, "`runner.callTool` (cordon tool in-process)"),
          },
          Math.round(allowed * 1000) / 1000,
        ),
        {
          measures: "exec true over MCP",
          ...compare(timings.mcp, timings.raw, '`Sandbox.exec("true")` on a held lease'),
        },
        {
          measures: "exec true over MCP",
          ...compare(timings.mcp, toolCli, "`cordon tool exec` (a process per call)"),
        },
      ],
      failures: failures.count,
      details: {
        runs,
        cliRuns,
        budget: `${budgetRatio}× + ${budgetExtraMs} ms`,
        overheadPerCallMs:
          Math.round((timings.mcp.medianMs - timings.library.medianMs) * 1000) / 1000,
        ...failures.details(),
      },
    };
  } finally {
    await client.close().catch(() => undefined);
    await ctx.baselines.removeContainer(container);
    await releaseWorkspaceDisksBelow(root);
    await rm(root, { recursive: true, force: true });
  }
}
