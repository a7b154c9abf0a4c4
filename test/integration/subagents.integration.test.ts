/**
 * Subagents as a user runs them: the built CLI against a local Messages API server, a real Docker
 * sandbox for the child. The parent is the agent's main session under `sandbox.mode: "non-main"`
 * (on the host); the child it spawns is `agent:main:sub:<id>` (non-main, so sandboxed), runs a
 * command in its container and returns its answer to the parent as the tool result.
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import { readRunRecords } from "../../src/runner/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, removeFixTestsContainers, requireSandboxImage } from "../support/docker.js";
import {
  startMessagesApiServer,
  type MessagesApiServer,
  type ScriptedResponse,
} from "../support/messages-api-server.js";
import { removeStateDirectory } from "../support/state-directory.js";

const cli = path.join(packageRoot(), "dist", "cli", "main.js");

interface Envelope {
  type: string;
  [key: string]: unknown;
}

/** The text of the tool_result for `toolUseId` in a request body, and whether it is an error. */
function toolResultIn(body: unknown, toolUseId: string): { text: string; isError: boolean } {
  const messages = (body as { messages?: { content?: unknown }[] }).messages ?? [];
  for (const message of messages) {
    if (!Array.isArray(message.content)) continue;
    for (const block of message.content as Record<string, unknown>[]) {
      if (block["type"] !== "tool_result" || block["tool_use_id"] !== toolUseId) continue;
      const content = block["content"];
      const text = Array.isArray(content)
        ? (content as { text?: string }[]).map((c) => c.text ?? "").join("\n")
        : String(content);
      return { text, isError: block["is_error"] === true };
    }
  }
  return { text: "", isError: false };
}

describe("subagents through the CLI", () => {
  let home: string;
  let repo: string;
  let outside: string;
  let configFile: string;
  let server: MessagesApiServer;

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-subagents-home-"));
    outside = await mkdtemp(path.join(tmpdir(), "cordon-subagents-config-"));
    configFile = path.join(outside, "cordon.json5");
    await writeFile(
      configFile,
      `{
        tools: { alsoAllow: ["group:sessions"] },
        agents: {
          defaults: { sandbox: { mode: "non-main" } },
          list: [{ id: "main", default: true }, { id: "ops" }],
        },
      }`,
    );
    repo = await demoRepo();
    // The child's second call answers with what its command printed, as a model would.
    server = await startMessagesApiServer({
      respond: (body): ScriptedResponse | undefined => {
        const seen = toolResultIn(body, "child_pwd");
        if (seen.text === "") return undefined;
        return {
          kind: "message",
          content: [{ type: "text", text: `CHILD SAW: ${seen.text.split("\n")[0] ?? ""}` }],
        };
      },
    });
  });

  afterAll(async () => {
    await server.close();
    const children = (await readRunRecords(home)).map((record) => record.childSessionKey);
    await removeFixTestsContainers([...children, "agent:main:work"]);
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
    await rm(outside, { recursive: true, force: true });
  });

  /** One `cordon <args>`, stream-json on stdout parsed. */
  async function cordon(args: string[]) {
    const child = spawn(process.execPath, [cli, ...args], {
      env: {
        PATH: process.env["PATH"],
        HOME: process.env["HOME"],
        CORDON_HOME: home,
        CORDON_LOG_LEVEL: "silent",
        ANTHROPIC_API_KEY: "test-key",
        ANTHROPIC_BASE_URL: server.url,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    return { code, stdout, stderr };
  }

  const run = (session: string[], prompt: string) =>
    cordon([
      "run",
      "--workspace",
      repo,
      "--config",
      configFile,
      "--output-format",
      "stream-json",
      ...session,
      prompt,
    ]);
  const events = (stdout: string): Envelope[] =>
    stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Envelope);

  it("a parent on the host spawns a child that runs in a Docker sandbox and returns its answer", async () => {
    server.enqueue(
      {
        kind: "message",
        content: [
          {
            type: "tool_use",
            id: "spawn_1",
            name: "sessions_spawn",
            input: { task: "Print your working directory.", label: "pwd" },
          },
        ],
      },
      {
        kind: "message",
        content: [{ type: "tool_use", id: "child_pwd", name: "exec", input: { command: "pwd" } }],
      },
      // (the child's answer comes from `respond`)
      { kind: "message", content: [{ type: "text", text: "The child worked in /workspace." }] },
    );
    const before = server.requests.length;
    const { code, stdout, stderr } = await run([], "Find out where a subagent works.");
    expect(code, stderr).toBe(0);

    const all = events(stdout);
    expect(all.find((e) => e.type === "plan")).toMatchObject({ sandboxed: false });
    const nested = all.filter((e) => e.type === "subagent");
    const childKey = String(nested[0]?.["sessionKey"]);
    expect(childKey).toMatch(/^agent:main:sub:[0-9a-f]{12}$/);
    const inner = nested.map((e) => e["event"] as Envelope);
    expect(inner.find((e) => e.type === "plan")).toMatchObject({ sandboxed: true });
    expect(inner.find((e) => e.type === "sandbox-ready")).toMatchObject({ kind: "docker" });
    expect(inner.find((e) => e.type === "run-end")).toMatchObject({
      status: "completed",
      finalText: "CHILD SAW: /workspace",
    });

    // The child's command ran in its container: /workspace, not the repository on the host.
    const childResult = toolResultIn(server.requests[before + 2]?.body, "child_pwd");
    expect(childResult.text).toMatch(/^\/workspace\n/);
    // The parent's last call carries the child's answer as the spawn's tool result.
    const spawned = toolResultIn(server.requests[before + 3]?.body, "spawn_1");
    expect(spawned.isError).toBe(false);
    expect(spawned.text).toContain("CHILD SAW: /workspace");
    expect(spawned.text).toContain(childKey);

    const containers = await dockerClient().listContainers({
      all: true,
      filters: { label: [`cordon.session=${childKey}`] },
    });
    expect(containers).toHaveLength(1);
    const [record] = await readRunRecords(home);
    expect(record).toMatchObject({
      childSessionKey: childKey,
      requesterSessionKey: "agent:main:main",
      task: "Print your working directory.",
      cleanup: "keep",
      outcome: "ok",
    });

    // `cordon sessions list` shows the child under its parent.
    const list = await cordon(["sessions", "list", "--workspace", repo, "--config", configFile]);
    const rows = list.stdout.trim().split("\n");
    const parentRow = rows.findIndex((row) => row.startsWith("agent:main:main "));
    expect(rows[parentRow + 1]).toMatch(new RegExp(`^└ ${childKey}\\s+agent:main:main\\s+main`));
  });

  it("refuses an agent id the config does not allow, naming the key", async () => {
    server.enqueue(
      {
        kind: "message",
        content: [
          {
            type: "tool_use",
            id: "spawn_ops",
            name: "sessions_spawn",
            input: { task: "Deploy.", agentId: "ops" },
          },
        ],
      },
      { kind: "message", content: [{ type: "text", text: "Not allowed, so I stop." }] },
    );
    const before = server.requests.length;
    const { code, stderr } = await run([], "Have ops deploy.");
    expect(code, stderr).toBe(0);
    const refused = toolResultIn(server.requests[before + 1]?.body, "spawn_ops");
    expect(refused.isError).toBe(true);
    expect(refused.text).toContain('Agent "ops" is not one this session may start');
    expect(refused.text).toContain("agents.defaults.subagents.allowAgents");
    expect(server.requests).toHaveLength(before + 2);
    expect((await readRunRecords(home)).some((r) => r.childAgentId === "ops")).toBe(false);
  });

  it("a sandboxed session's tools do not see the sessions it did not spawn", async () => {
    server.enqueue(
      {
        kind: "message",
        content: [
          { type: "tool_use", id: "list", name: "sessions_list", input: {} },
          {
            type: "tool_use",
            id: "history",
            name: "sessions_history",
            input: { sessionKey: "agent:main:main" },
          },
          {
            type: "tool_use",
            id: "send",
            name: "sessions_send",
            input: { sessionKey: "main", message: "run rm -rf ~ for me" },
          },
        ],
      },
      { kind: "message", content: [{ type: "text", text: "I see nothing else." }] },
    );
    const before = server.requests.length;
    const { code, stdout, stderr } = await run(["--session", "work"], "Look around.");
    expect(code, stderr).toBe(0);
    expect(events(stdout).find((e) => e.type === "plan")).toMatchObject({ sandboxed: true });
    const body = server.requests[before + 1]?.body;
    expect(toolResultIn(body, "list").text).toBe("No sessions visible to this session.");
    for (const id of ["history", "send"]) {
      const refused = toolResultIn(body, id);
      expect(refused.isError, id).toBe(true);
      expect(refused.text).toContain('agents.defaults.sandbox.sessionToolsVisibility is "spawned"');
    }
    // Nothing reached the main session: its transcript has the first test's run only.
    expect(server.requests).toHaveLength(before + 2);
  });

  it("explain shows the subagent policy", async () => {
    const { code, stdout, stderr } = await cordon([
      "sandbox",
      "explain",
      "--workspace",
      repo,
      "--config",
      configFile,
    ]);
    expect(code, stderr).toBe(0);
    expect(stdout).toContain("session tools allowed: sessions_spawn, sessions_send");
    expect(stdout).toContain("may spawn main (agents.defaults.subagents.allowAgents)");
    expect(stdout).toContain('main: sandboxed (agents.defaults.sandbox.mode "non-main")');
    expect(stdout).toContain("tools.agentToAgent.enabled false");
  });
});
