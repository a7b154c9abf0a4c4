/**
 * Subagents through the runner as `cordon run` uses it (createRunner → runTask → toolset → the
 * session host → a child run), with a scripted model and in-memory sandboxes: the wiring, the
 * refusals and the run records. The real Docker sandbox and the Messages API are in
 * test/integration/subagents.integration.test.ts.
 */
import { access, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { parseConfig } from "../../config/index.js";
import { MemorySandbox } from "../../tools/testing/index.js";
import { createRunner } from "../create-runner.js";
import { ScriptedModelClient, type ModelScriptInput } from "../model/index.js";
import type { RunPlan } from "../../policy/index.js";
import type { RunnerEvent, SandboxProvider } from "../orchestrate/index.js";
import { sessionFiles } from "../session/index.js";
import { readRunRecords } from "./run-records.js";

interface Harness {
  model: ScriptedModelClient;
  acquired: RunPlan[];
  discarded: RunPlan[];
  events: RunnerEvent[];
  runner: ReturnType<typeof createRunner>;
}

describe("subagents", () => {
  let home: string;
  let workspace: string;

  beforeEach(async () => {
    home = await mkdtemp(path.join(tmpdir(), "cordon-subagents-home-"));
    workspace = await mkdtemp(path.join(tmpdir(), "cordon-subagents-ws-"));
  });
  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
    await rm(workspace, { recursive: true, force: true });
  });

  function harness(
    turns: ModelScriptInput["turns"],
    config: Record<string, unknown> = {},
  ): Harness {
    const model = new ScriptedModelClient({ version: 1, turns });
    const acquired: RunPlan[] = [];
    const discarded: RunPlan[] = [];
    const sandboxes: SandboxProvider = {
      acquire: (plan) => {
        acquired.push(plan);
        return Promise.resolve({
          sandbox: new MemorySandbox({ id: plan.sessionKey }),
          fresh: true,
          release: () => Promise.resolve(),
        });
      },
      discard: (plan) => {
        discarded.push(plan);
        return Promise.resolve();
      },
    };
    const parsed = parseConfig(
      {
        tools: { alsoAllow: ["group:sessions"] },
        ...config,
        agents: {
          ...(config["agents"] as Record<string, unknown> | undefined),
          defaults: {
            workspace,
            sandbox: { mode: "non-main" },
            ...(config["agents"] as { defaults?: Record<string, unknown> } | undefined)?.defaults,
          },
        },
      },
      { cwd: workspace, homeDir: home },
    );
    const runner = createRunner({
      config: parsed,
      model,
      sandboxes,
      env: { CORDON_HOME: home },
      cwd: workspace,
    });
    return { model, acquired, discarded, events: [], runner };
  }

  const toolResults = (model: ScriptedModelClient, call: number): string =>
    JSON.stringify(model.requests[call]?.messages.at(-1));

  it("runs the child in its own non-main session and gives its answer to the parent", async () => {
    const h = harness([
      {
        content: [
          {
            type: "tool_use",
            id: "spawn_1",
            name: "sessions_spawn",
            input: { task: "Count the files.", label: "counter" },
          },
        ],
      },
      { content: [{ type: "text", text: "CHILD ANSWER: 42 files" }] },
      { content: [{ type: "text", text: "The child says 42." }] },
    ]);
    const result = await h.runner.run({
      prompt: "Delegate the count.",
      onEvent: (event) => h.events.push(event),
    });

    expect(result.status, result.message).toBe("completed");
    // The parent (main, mode non-main) is not sandboxed; the child is.
    expect(
      h.acquired.map((p) => [p.sessionKey.replace(/[0-9a-f]{12}$/, "<id>"), p.sandbox.enabled]),
    ).toEqual([
      ["agent:main:main", false],
      ["agent:main:sub:<id>", true],
    ]);
    const child = h.model.requests[1];
    expect(child?.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "Count the files." }] },
    ]);
    expect(child?.tools.map((t) => t.name)).not.toContain("sessions_spawn");
    expect(toolResults(h.model, 2)).toContain("CHILD ANSWER: 42 files");
    expect(toolResults(h.model, 2)).toContain('"isError":false');

    const nested = h.events.filter((e) => e.type === "subagent");
    expect(nested.map((e) => e.event.type)).toEqual(
      expect.arrayContaining([
        "run-start",
        "plan",
        "sandbox-ready",
        "assistant-message",
        "run-end",
      ]),
    );
    expect(nested.every((e) => e.toolCallId === "spawn_1" && e.label === "counter")).toBe(true);
    expect(nested.some((e) => e.event.type === "text-delta")).toBe(false);
    // The parent's own run-end is the last event; the child's is nested.
    expect(h.events.filter((e) => e.type === "run-end")).toHaveLength(1);

    const [record] = await readRunRecords(home);
    expect(record).toMatchObject({
      requesterSessionKey: "agent:main:main",
      childAgentId: "main",
      task: "Count the files.",
      cleanup: "keep",
      outcome: "ok",
      status: "completed",
      label: "counter",
    });
    expect(record?.childSessionKey).toBe(h.acquired[1]?.sessionKey);
  });

  it("refuses an agent not in allowAgents with an error result naming the key", async () => {
    const h = harness(
      [
        {
          content: [
            {
              type: "tool_use",
              id: "spawn_1",
              name: "sessions_spawn",
              input: { task: "x", agentId: "Ops" },
            },
          ],
        },
        { content: [{ type: "text", text: "ok, I will not." }] },
      ],
      { agents: { list: [{ id: "main" }, { id: "ops" }] } },
    );
    const result = await h.runner.run({ prompt: "go" });
    expect(result.status).toBe("completed");
    const answer = toolResults(h.model, 1);
    expect(answer).toContain('"isError":true');
    expect(answer).toContain('Agent \\"ops\\" is not one this session may start');
    expect(answer).toContain("agents.defaults.subagents.allowAgents");
    expect(h.acquired).toHaveLength(1);
    expect(await readRunRecords(home)).toEqual([]);
  });

  it("shows a sandboxed session only its own children, and refuses the rest", async () => {
    const h = harness([
      // The main session runs first, so there is a session the sandboxed one must not see.
      { content: [{ type: "text", text: "main here" }] },
      {
        content: [
          { type: "tool_use", id: "s", name: "sessions_spawn", input: { task: "child task" } },
        ],
      },
      { content: [{ type: "text", text: "child done" }] },
      {
        content: [
          { type: "tool_use", id: "l", name: "sessions_list", input: {} },
          {
            type: "tool_use",
            id: "h",
            name: "sessions_history",
            input: { sessionKey: "agent:main:main" },
          },
          {
            type: "tool_use",
            id: "m",
            name: "sessions_send",
            input: { sessionKey: "main", message: "hi" },
          },
        ],
      },
      { content: [{ type: "text", text: "seen" }] },
    ]);
    expect((await h.runner.run({ prompt: "hello" })).status).toBe("completed");
    const result = await h.runner.run({ prompt: "work", sessionKey: "work" });
    expect(result.status, result.message).toBe("completed");

    const childKey = (await readRunRecords(home))[0]?.childSessionKey ?? "";
    const last = h.model.requests[4]?.messages.slice(-3) ?? [];
    const [list, history, send] = last.map((m) => JSON.stringify(m));
    // One line: the child (spawned by this session); neither main nor this session itself.
    expect(list).toContain(`"text":"${childKey} — agent main, spawned by agent:main:work`);
    expect(list).not.toContain("agent:main:main");
    expect(list).not.toContain("\\n");
    for (const refused of [history, send]) {
      expect(refused).toContain('"isError":true');
      expect(refused).toContain('sessionToolsVisibility is \\"spawned\\"');
    }
  });

  it("never lets a sandboxed session start or message a run on the host, whatever the config", async () => {
    const h = harness(
      [
        { content: [{ type: "text", text: "main here" }] },
        {
          content: [
            {
              type: "tool_use",
              id: "spawn_host",
              name: "sessions_spawn",
              input: { task: "cat ~/.ssh/id_rsa", agentId: "hostly" },
            },
            {
              type: "tool_use",
              id: "send_main",
              name: "sessions_send",
              input: { sessionKey: "agent:main:main", message: "cat ~/.ssh/id_rsa" },
            },
          ],
        },
        { content: [{ type: "text", text: "refused" }] },
      ],
      {
        agents: {
          defaults: {
            sandbox: { mode: "non-main", sessionToolsVisibility: "all" },
            subagents: { allowAgents: ["*"] },
          },
          list: [{ id: "main" }, { id: "hostly", sandbox: { mode: "off" } }],
        },
      },
    );
    expect((await h.runner.run({ prompt: "hello" })).status).toBe("completed");
    expect((await h.runner.run({ prompt: "escape", sessionKey: "work" })).status).toBe("completed");
    const [spawned, sent] = (h.model.requests[2]?.messages.slice(-2) ?? []).map((m) =>
      JSON.stringify(m),
    );
    expect(spawned).toContain('"isError":true');
    expect(spawned).toContain('A subagent of \\"hostly\\" would run on the host');
    expect(spawned).toContain("agents.list[1].sandbox.mode does not sandbox it");
    expect(sent).toContain('"isError":true');
    expect(sent).toContain("A message to agent:main:main would make it run on the host");
    // Neither reached a model: three calls, main's, the sandboxed session's two.
    expect(h.model.requests).toHaveLength(3);
    expect(await readRunRecords(home)).toEqual([]);
  });

  it("deletes the child's session and sandbox with cleanup delete", async () => {
    const h = harness([
      {
        content: [
          {
            type: "tool_use",
            id: "s",
            name: "sessions_spawn",
            input: { task: "t", cleanup: "delete" },
          },
        ],
      },
      { content: [{ type: "text", text: "child done" }] },
      { content: [{ type: "text", text: "parent done" }] },
    ]);
    expect((await h.runner.run({ prompt: "go" })).status).toBe("completed");
    const [record] = await readRunRecords(home);
    expect(record).toMatchObject({ cleanup: "delete", deleted: true, outcome: "ok" });
    expect(h.discarded.map((p) => p.sessionKey)).toEqual([record?.childSessionKey]);
    const files = sessionFiles(home, record?.childSessionKey ?? "", record?.childProject);
    await expect(access(files.transcript)).rejects.toThrow();
    expect(toolResults(h.model, 2)).toContain("Its session was deleted");
  });

  it("records a child stopped by its own time limit as a timeout, the parent going on", async () => {
    const h = harness([
      {
        content: [
          {
            type: "tool_use",
            id: "s",
            name: "sessions_spawn",
            input: { task: "t", timeoutSec: 1 },
          },
        ],
      },
      { waitForAbort: true },
      { content: [{ type: "text", text: "the child timed out" }] },
    ]);
    expect((await h.runner.run({ prompt: "go" })).status).toBe("completed");
    const [record] = await readRunRecords(home);
    expect(record).toMatchObject({ outcome: "timeout", status: "timeout" });
    expect(toolResults(h.model, 2)).toContain("ended with outcome timeout");
  });
});
