import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { ConfigError, DockerUnavailableError, EnvironmentError } from "../../common/index.js";
import type { RunPlan } from "../../policy/index.js";
import { plan as planFor } from "../../policy/testing/plan-fixtures.js";
import { builtinTools } from "../../tools/index.js";
import { MemorySandbox } from "../../tools/testing/index.js";
import { ScriptedModelClient } from "../model/index.js";
import { readSessionEntries } from "../session/index.js";
import { failedRun, runTask, type RunnerEvent } from "./run-task.js";
import type { SandboxProvider } from "./sandbox-provider.js";

/**
 * A plan as planRun makes it: sandboxed, a seeded copy, `write` denied by tools.deny; the
 * workspace is a path the model must never see.
 */
function plan(): RunPlan {
  return planFor(
    {
      model: "m1",
      tools: { allow: ["exec", "read", "edit", "write"], deny: ["write"] },
      agents: { defaults: { workspace: "/host/secret/project", sandbox: { mode: "all" } } },
    },
    { sessionKey: "task" },
  );
}

function providerFor(sandbox: MemorySandbox, released: string[] = []): SandboxProvider {
  return {
    acquire: () =>
      Promise.resolve({
        sandbox,
        fresh: true,
        release: () => {
          released.push(sandbox.id);
          return Promise.resolve();
        },
      }),
  };
}

describe("runTask", () => {
  let stateDir: string;
  beforeEach(async () => {
    stateDir = await mkdtemp(path.join(tmpdir(), "cordon-run-task-"));
  });
  afterEach(async () => {
    await rm(stateDir, { recursive: true, force: true });
  });

  it("runs the loop in the provided sandbox, persists the session and releases the sandbox", async () => {
    const sandbox = new MemorySandbox({
      files: { "AGENTS.md": "Run tests with `make test`.", "a.txt": "hello\n" },
    });
    const model = new ScriptedModelClient({
      version: 1,
      turns: [
        { content: [{ type: "tool_use", name: "read", input: { path: "a.txt" } }] },
        { content: [{ type: "text", text: "It says hello." }] },
      ],
    });
    const events: RunnerEvent[] = [];
    const released: string[] = [];
    const result = await runTask({
      plan: plan(),
      model,
      sandboxes: providerFor(sandbox, released),
      tools: builtinTools(),
      stateDir,
      prompt: "What does a.txt say?",
      io: { onEvent: (event) => events.push(event) },
    });

    expect(result).toMatchObject({ status: "completed", exitCode: 0, turns: 2 });
    expect(result.finalText).toBe("It says hello.");
    expect(released).toEqual(["memory"]);
    const types = events.map((event) => event.type);
    expect(types[0]).toBe("run-start");
    expect(types.filter((type) => type === "run-start")).toHaveLength(1);
    expect(types.slice(1, 3)).toEqual(["plan", "sandbox-ready"]);
    expect(types.at(-1)).toBe("run-end");

    const request = model.requests[0];
    expect(request?.tools.map((tool) => tool.name)).toEqual(["exec", "read", "edit"]);
    expect(request?.system).toContain("make test");
    expect(request?.system).not.toContain("/host/secret/project");

    const entries = await readSessionEntries({
      stateDir,
      sessionKey: "agent:main:task",
      project: plan().agent.workspaceId,
    });
    expect(entries.map((entry) => entry.role)).toEqual(["user", "assistant", "user", "assistant"]);
  });

  it("refuses a tool the plan denies with the config key, and never runs it", async () => {
    const sandbox = new MemorySandbox();
    const model = new ScriptedModelClient({
      version: 1,
      turns: [
        { content: [{ type: "tool_use", name: "write", input: { path: "x", content: "y" } }] },
        { content: [{ type: "text", text: "done" }] },
      ],
    });
    const events: RunnerEvent[] = [];
    await runTask({
      plan: plan(),
      model,
      sandboxes: providerFor(sandbox),
      tools: builtinTools(),
      stateDir,
      prompt: "write x",
      io: { onEvent: (event) => events.push(event) },
    });
    const result = events.find((event) => event.type === "tool-result");
    expect(result).toMatchObject({ isError: true });
    expect(JSON.stringify(result)).toContain("tools.deny");
    expect(await sandbox.files.stat("x")).toBeUndefined();
  });

  it("announces a run that could not be planned with one run-start and one run-end", async () => {
    const events: RunnerEvent[] = [];
    const result = await runTask({
      plan: () => Promise.reject(new DockerUnavailableError("no engine")),
      model: new ScriptedModelClient({ version: 1, turns: [] }),
      requestedSessionKey: "fix-1",
      sandboxes: providerFor(new MemorySandbox()),
      tools: builtinTools(),
      stateDir,
      prompt: "anything",
      io: { onEvent: (event) => events.push(event) },
    });
    expect(result).toMatchObject({ status: "sandbox_error", sessionKey: "fix-1" });
    expect(events.map((event) => event.type)).toEqual(["run-start", "run-end"]);
  });

  it("frames a run that failed before it could be asked for (its prompt unreadable) the same way", () => {
    const events: RunnerEvent[] = [];
    const result = failedRun({
      error: new ConfigError("no prompt given", { fix: "pass the task as an argument" }),
      sessionKey: "fix-2",
      onEvent: (event) => events.push(event),
    });
    expect(result).toMatchObject({
      status: "config_error",
      exitCode: 2,
      sessionKey: "fix-2",
      fix: "pass the task as an argument",
    });
    expect(events).toMatchObject([
      { type: "run-start", runId: result.runId, sessionKey: "fix-2" },
      { type: "run-end", ...result },
    ]);
  });

  it("ends with sandbox_error and exit 3 when the sandbox cannot be provided", async () => {
    const model = new ScriptedModelClient({ version: 1, turns: [] });
    const events: RunnerEvent[] = [];
    const result = await runTask({
      plan: plan(),
      model,
      sandboxes: {
        acquire: () => Promise.reject(new DockerUnavailableError("no Docker engine answers")),
      },
      tools: builtinTools(),
      stateDir,
      prompt: "anything",
      io: { onEvent: (event) => events.push(event) },
    });
    expect(result).toMatchObject({ status: "sandbox_error", exitCode: 3, turns: 0 });
    expect(result.message).toContain("no Docker engine");
    expect(events.map((event) => event.type)).toEqual(["run-start", "plan", "run-end"]);
    expect(model.requests).toHaveLength(0);
  });

  it("runs the setup phase inside the run, before its sandbox: a failed one is setup_failed, exit 9", async () => {
    const model = new ScriptedModelClient({ version: 1, turns: [] });
    const events: RunnerEvent[] = [];
    let acquired = 0;
    const result = await runTask({
      plan: plan(),
      model,
      sandboxes: {
        acquire: () => {
          acquired += 1;
          return Promise.reject(new Error("the agent's sandbox must not be acquired"));
        },
      },
      tools: builtinTools(),
      stateDir,
      prompt: "anything",
      io: { onEvent: (event) => events.push(event) },
      setup: ({ emit }) => {
        emit({ type: "setup-start", command: "npm ci" });
        emit({
          type: "egress",
          host: "registry.yarnpkg.com",
          port: 443,
          allowed: false,
          phase: "setup",
        });
        return Promise.reject(new EnvironmentError("The setup command `npm ci` failed (exit 1)."));
      },
    });
    expect(result).toMatchObject({ status: "setup_failed", exitCode: 9, turns: 0 });
    expect(result.message).toContain("npm ci");
    expect(events.map((event) => event.type)).toEqual([
      "run-start",
      "plan",
      "setup-start",
      "egress",
      "run-end",
    ]);
    expect(acquired).toBe(0);
    expect(model.requests).toHaveLength(0);
  });

  it("serialises two runs on one session through the lanes", async () => {
    const sandbox = new MemorySandbox();
    const order: string[] = [];
    const provider: SandboxProvider = {
      acquire: async () => {
        order.push("acquire");
        await new Promise((resolve) => setTimeout(resolve, 5));
        return {
          sandbox,
          fresh: false,
          release: () => {
            order.push("release");
            return Promise.resolve();
          },
        };
      },
    };
    const run = (text: string) =>
      runTask({
        plan: plan(),
        model: new ScriptedModelClient({
          version: 1,
          turns: [{ content: [{ type: "text", text }] }],
        }),
        sandboxes: provider,
        tools: builtinTools(),
        stateDir,
        prompt: text,
        lanes,
      });
    const { SessionLanes } = await import("../session/index.js");
    const lanes = new SessionLanes();
    const results = await Promise.all([run("one"), run("two")]);
    expect(results.map((result) => result.status)).toEqual(["completed", "completed"]);
    expect(order).toEqual(["acquire", "release", "acquire", "release"]);
  });

  it("passes a running command's output on as tool-output events (the toolset it binds)", async () => {
    const sandbox = new MemorySandbox({
      exec: () => ({ chunks: [{ stdout: "building\n" }, { stdout: "built\n", afterMs: 300 }] }),
    });
    const model = new ScriptedModelClient({
      version: 1,
      turns: [
        { content: [{ type: "tool_use", name: "exec", input: { command: "make" } }] },
        { content: [{ type: "text", text: "built" }] },
      ],
    });
    const events: RunnerEvent[] = [];
    await runTask({
      plan: plan(),
      model,
      sandboxes: providerFor(sandbox),
      tools: builtinTools(),
      stateDir,
      prompt: "build it",
      io: { onEvent: (event) => events.push(event) },
    });
    const outputs = events.flatMap((event) => (event.type === "tool-output" ? [event] : []));
    expect(outputs.map((event) => event.text).join("")).toBe("building\nbuilt\n");
    expect(outputs.at(-1)?.lastLine).toBe("built");
  });
});
