/**
 * The real Claude Code CLI as cordon's MCP client, on the host (docs/mcp.md's recipe): `claude -p`
 * with `--mcp-config` starting the built `cordon mcp`, its own file and shell tools disallowed,
 * driven by the local Messages API server. Its calls to `mcp__cordon__exec` and
 * `mcp__cordon__write` run in the session's sandbox on a private copy; its own Bash, asked for
 * anyway, is refused by Claude Code, so nothing reaches the host; `cordon diff` shows the work and
 * the repository is untouched. The CLI is the native binary the claude-code runtime's image is
 * built from (images/claude-code.json), fetched with the host's npm and checked against its pin.
 */
import { execFile } from "node:child_process";
import { access, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { arch, tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import { claudeHostTools } from "../../src/mcp/index.js";
import { createRunner } from "../../src/runner/index.js";
import { fetchRuntimePackages } from "../../src/sandbox/docker/image-runtime-packages.js";
import { demoRepo, git } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { startMessagesApiServer, type MessagesApiServer } from "../support/messages-api-server.js";
import { runCordon } from "../support/run-cli.js";
import { builtCli } from "../support/spawn-cordon.js";
import { removeStateDirectory } from "../support/state-directory.js";

const run = promisify(execFile);

/** The text Claude Code sent back to the model for one tool call. */
function toolResult(
  server: MessagesApiServer,
  toolUseId: string,
): { text: string; isError: boolean } | undefined {
  for (const request of server.requests) {
    const messages = (request.body as { messages?: { content?: unknown }[] } | undefined)?.messages;
    for (const message of messages ?? []) {
      if (!Array.isArray(message.content)) continue;
      for (const block of message.content as {
        tool_use_id?: string;
        content?: unknown;
        is_error?: boolean;
      }[]) {
        if (block.tool_use_id === toolUseId) {
          return { text: JSON.stringify(block.content), isError: block.is_error === true };
        }
      }
    }
  }
  return undefined;
}

describe("Claude Code with cordon mcp as its only tools", () => {
  let root: string;
  let claude: string;
  let repo: string;
  let home: string;
  let server: MessagesApiServer;
  const session = "claude-mcp";

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-mcp-claude-"));
    const files = await fetchRuntimePackages(
      path.join(packageRoot(), "images", "claude-code.json"),
      arch() === "arm64" ? "aarch64" : "x86_64",
      root,
    );
    const tarball = files.find((file) => file.contextName === "claude.tgz");
    if (!tarball) throw new Error("images/claude-code.json pins no claude package");
    await run("tar", ["-xzf", tarball.path, "-C", root, "package/claude"]);
    claude = path.join(root, "package", "claude");
    home = path.join(root, "cordon-home");
    repo = await demoRepo();
    server = await startMessagesApiServer();
  }, 300_000);

  afterAll(async () => {
    await server?.close();
    if (home) {
      // The session's container, by the name its plan gives it (whatever became of the test).
      const runner = createRunner({
        cwd: repo,
        env: { CORDON_HOME: home, CORDON_CONFIG: "" },
        workspace: repo,
      });
      const name = (await runner.plan({ sessionKey: session }).catch(() => undefined))?.sandbox.spec
        ?.containerName;
      if (name) {
        await dockerClient()
          .getContainer(name)
          .remove({ force: true })
          .catch(() => undefined);
      }
      await removeStateDirectory(home);
    }
    if (repo) await rm(path.dirname(repo), { recursive: true, force: true });
    if (root) await rm(root, { recursive: true, force: true });
  });

  it("runs its exec and write in the sandbox, refuses its own Bash, and leaves the repository to the person", async () => {
    const hostMarker = path.join(root, "host-touched");
    const config = path.join(root, "cordon.mcp.json");
    await writeFile(
      config,
      JSON.stringify({
        mcpServers: {
          cordon: {
            type: "stdio",
            command: process.execPath,
            args: [builtCli, "mcp", "--session", session],
          },
        },
      }),
    );
    server.enqueue(
      {
        kind: "message",
        content: [
          {
            type: "tool_use",
            id: "toolu_exec",
            name: "mcp__cordon__exec",
            input: { command: "pwd; id -un; python3 -m unittest 2>&1 | tail -1" },
          },
        ],
      },
      {
        kind: "message",
        content: [
          {
            type: "tool_use",
            id: "toolu_write",
            name: "mcp__cordon__write",
            input: { path: "NOTES.md", content: "Written by Claude Code through cordon.\n" },
          },
        ],
      },
      {
        kind: "message",
        content: [
          {
            type: "tool_use",
            id: "toolu_bash",
            name: "Bash",
            input: { command: `touch ${hostMarker}`, description: "try the host" },
          },
        ],
      },
      {
        kind: "message",
        content: [{ type: "text", text: "Notes written; ready for review." }],
      },
    );
    // A home of its own: no user settings, credentials or MCP servers of this machine's user.
    const claudeHome = path.join(root, "claude-home");
    await mkdir(claudeHome);
    const allowed = ["exec", "read", "write", "edit", "ls", "explain", "diff"]
      .map((name) => `mcp__cordon__${name}`)
      .join(",");
    const result = await run(
      claude,
      [
        "-p",
        "Add a NOTES.md.",
        "--mcp-config",
        config,
        "--strict-mcp-config",
        "--model",
        "claude-test-model",
        "--output-format",
        "json",
        "--allowedTools",
        allowed,
        "--disallowedTools",
        claudeHostTools.join(","),
      ],
      {
        cwd: repo,
        timeout: 240_000,
        maxBuffer: 16 * 1024 * 1024,
        env: {
          PATH: process.env["PATH"],
          HOME: claudeHome,
          ANTHROPIC_BASE_URL: server.url,
          ANTHROPIC_API_KEY: "sk-ant-test-mcp-client",
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
          DISABLE_AUTOUPDATER: "1",
          // Read by the `cordon mcp` Claude Code starts, which inherits this environment.
          CORDON_HOME: home,
          CORDON_CONFIG: "",
          CORDON_LOG_LEVEL: "silent",
        },
      },
    ).catch((error: { stdout?: string; stderr?: string; message: string }) => {
      throw new Error(
        `claude failed: ${error.message}\n${error.stdout ?? ""}\n${error.stderr ?? ""}`,
      );
    });
    const outcome = JSON.parse(result.stdout) as { result?: string; is_error?: boolean };
    expect(outcome, result.stdout).toMatchObject({
      is_error: false,
      result: "Notes written; ready for review.",
    });

    // The exec ran in the container, on the seeded copy, as the sandbox's user.
    const exec = toolResult(server, "toolu_exec");
    expect(exec?.isError).toBe(false);
    expect(exec?.text).toContain("/workspace");
    expect(exec?.text).toContain("sandbox");
    expect(exec?.text).toMatch(/FAILED|OK/);
    expect(toolResult(server, "toolu_write")?.isError).toBe(false);
    // Its own Bash was not run: Claude Code answered the call with an error, the host is as it was.
    const bash = toolResult(server, "toolu_bash");
    expect(bash?.isError).toBe(true);
    expect(bash?.text).toContain("No such tool available: Bash");
    await expect(access(hostMarker)).rejects.toThrow();

    // The person's side: the work is in the session's copy, the repository untouched.
    const cordonEnv = { CORDON_HOME: home, CORDON_CONFIG: "" };
    let review = await runCordon(["diff", "--session", session, "--workspace", repo], cordonEnv);
    for (let attempt = 0; attempt < 40 && review.exitCode !== 0; attempt += 1) {
      // The server may still be letting the session go after Claude Code exited.
      await new Promise((resolve) => setTimeout(resolve, 250));
      review = await runCordon(["diff", "--session", session, "--workspace", repo], cordonEnv);
    }
    expect(review.stdout, review.stderr).toContain("+Written by Claude Code through cordon.");
    await expect(access(path.join(repo, "NOTES.md"))).rejects.toThrow();
    expect(git(repo, "status", "--porcelain")).toBe("");

    // `cordon logs` has the calls, from a run that names Claude Code as its client.
    const logs = await runCordon(
      ["logs", "--session", session, "--workspace", repo, "--json"],
      cordonEnv,
    );
    const records = logs.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string; name?: string; client?: string });
    expect(records[0]?.type).toBe("run-start");
    expect(records[0]?.client).toMatch(/claude/i);
    expect(records.filter((r) => r.type === "tool-call").map((r) => r.name)).toEqual([
      "exec",
      "write",
    ]);
  }, 300_000);
});
