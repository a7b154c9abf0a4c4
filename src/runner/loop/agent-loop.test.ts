import { appendFile, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  ScriptedModelClient,
  type ContentBlock,
  type ModelScriptInput,
  type ToolResultBlock,
} from "../model/index.js";
import { JsonlSession, sessionFilePath } from "../session/index.js";
import { runAgentLoop, type AgentLoopOptions } from "./agent-loop.js";
import { MessageQueue } from "./message-queue.js";
import type { RunEvent } from "./run-events.js";
import type { ToolResult } from "../../tools/index.js";
import type { RunnerToolset, ToolCallContext } from "./tool-executor.js";

let stateDir: string;
const sessions: JsonlSession[] = [];
beforeEach(async () => {
  stateDir = await mkdtemp(path.join(tmpdir(), "cordon-loop-"));
});
afterEach(async () => {
  for (const s of sessions.splice(0)) await s.close();
  await rm(stateDir, { recursive: true, force: true });
});

async function openSession(key = "agent:main:task"): Promise<JsonlSession> {
  const session = await JsonlSession.open({ stateDir, sessionKey: key });
  sessions.push(session);
  return session;
}

interface FakeCall {
  name: string;
  input: unknown;
  toolCallId: string;
}

/** A toolset that records calls; `exec` echoes, `slow` waits for abort, `boom` throws. */
function fakeToolset(hooks: { onCall?: (call: FakeCall) => void } = {}): RunnerToolset & {
  calls: FakeCall[];
  abortedCalls: string[];
} {
  const calls: FakeCall[] = [];
  const abortedCalls: string[] = [];
  return {
    calls,
    abortedCalls,
    specs: ["exec", "slow", "boom"].map((name) => ({
      name,
      description: `${name} tool`,
      inputSchema: { type: "object" },
    })),
    async call(name: string, rawInput: unknown, context: ToolCallContext): Promise<ToolResult> {
      const call = { name, input: rawInput, toolCallId: context.toolCallId };
      calls.push(call);
      hooks.onCall?.(call);
      if (name === "boom") throw new Error("the disk is on fire");
      if (name === "slow") {
        await new Promise<void>((resolve) => {
          context.signal.addEventListener(
            "abort",
            () => {
              abortedCalls.push(context.toolCallId);
              resolve();
            },
            { once: true },
          );
        });
        return { content: [{ type: "text", text: "killed" }], isError: true };
      }
      return {
        content: [{ type: "text", text: `ran ${JSON.stringify(rawInput)}` }],
        isError: false,
      };
    },
  };
}

async function run(
  script: ModelScriptInput,
  overrides: Partial<AgentLoopOptions> = {},
): Promise<{
  result: Awaited<ReturnType<typeof runAgentLoop>>;
  events: RunEvent[];
  model: ScriptedModelClient;
  session: JsonlSession;
  toolset: ReturnType<typeof fakeToolset>;
}> {
  const model = new ScriptedModelClient(script);
  const session = overrides.session ? (overrides.session as JsonlSession) : await openSession();
  const toolset = (overrides.toolset as ReturnType<typeof fakeToolset>) ?? fakeToolset();
  const events: RunEvent[] = [];
  const result = await runAgentLoop({
    model,
    modelId: "primary",
    toolset,
    session,
    systemPrompt: "system",
    prompt: "do the task",
    retryDelayMs: 0,
    ...overrides,
    io: { onEvent: (e) => events.push(e), ...overrides.io },
  });
  return { result, events, model, session, toolset };
}

const text = (t: string) => ({ content: [{ type: "text" as const, text: t }] });
const tool = (name: string, input: Record<string, unknown> = {}, id?: string) => ({
  type: "tool_use" as const,
  name,
  input,
  ...(id ? { id } : {}),
});

describe("runAgentLoop", () => {
  it("awaits beforeToolCalls once before each turn's tools and calls afterToolCalls once after them, never for a turn without them, and goes on when either throws", async () => {
    const order: string[] = [];
    const toolset = fakeToolset({ onCall: (call) => order.push(`tool ${call.toolCallId}`) });
    const { result } = await run(
      {
        version: 1,
        turns: [
          { content: [tool("exec", { command: "a" }, "t1"), tool("exec", { command: "b" }, "t2")] },
          { content: [tool("exec", { command: "c" }, "t3")] },
          text("done"),
        ],
      },
      {
        toolset,
        beforeToolCalls: async (turn) => {
          order.push(`before turn ${turn}`);
          await new Promise((resolve) => setTimeout(resolve, 5));
          if (turn === 2) throw new Error("no checkpoint");
        },
        afterToolCalls: (turn) => {
          order.push(`after turn ${turn}`);
          if (turn === 1) throw new Error("no record");
        },
      },
    );
    expect(result.status).toBe("completed");
    expect(order).toEqual([
      "before turn 1",
      "tool t1",
      "tool t2",
      "after turn 1",
      "before turn 2",
      "tool t3",
      "after turn 2",
    ]);
  });

  it("runs tools until the model stops, persisting every step", async () => {
    const { result, events, model, session, toolset } = await run({
      version: 1,
      turns: [
        { content: [{ type: "text", text: "Looking." }, tool("exec", { command: "ls" }, "t1")] },
        text("All done."),
      ],
    });
    expect(result).toMatchObject({ status: "completed", exitCode: 0, turns: 2 });
    expect(result.finalText).toBe("All done.");
    expect(toolset.calls).toEqual([{ name: "exec", input: { command: "ls" }, toolCallId: "t1" }]);
    // The loop reports the run's course; its start and end are the orchestrator's (run-task).
    expect(events[0]).toMatchObject({ type: "model-start", turn: 1, model: "primary" });
    expect(events.map((e) => e.type)).not.toContain("run-end");
    expect(events.map((e) => e.type)).toContain("tool-result");
    // The second call saw the tool result, built from the session.
    const second = model.requests[1]?.messages ?? [];
    expect(second.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(second[2]?.content[0]).toMatchObject({ type: "tool_result", toolUseId: "t1" });
    expect(session.messages()).toHaveLength(4);
    expect(model.requests[0]?.tools.map((t) => t.name)).toEqual(["exec", "slow", "boom"]);
  });

  it("turns unknown tools and thrown errors into error results, not a failed run", async () => {
    const { result, session } = await run({
      version: 1,
      turns: [{ content: [tool("nope", {}, "a"), tool("boom", {}, "b")] }, text("I see.")],
    });
    expect(result.status).toBe("completed");
    const results = session
      .messages()
      .flatMap((m): readonly ContentBlock[] => m.content)
      .filter((b): b is ToolResultBlock => b.type === "tool_result");
    expect(results).toHaveLength(2);
    expect(results[0]).toMatchObject({ isError: true });
    expect(JSON.stringify(results[0])).toMatch(/no tool named \\"nope\\".*exec, slow, boom/);
    expect(JSON.stringify(results[1])).toMatch(/the disk is on fire/);
  });

  it("never runs a tool call cut off by max_tokens, and tells the model", async () => {
    const { result, toolset, model } = await run({
      version: 1,
      turns: [
        { content: [tool("exec", { command: "rm -rf /wor" }, "cut")], stopReason: "max_tokens" },
        text("Retrying smaller."),
      ],
    });
    expect(toolset.calls).toEqual([]);
    expect(result.status).toBe("completed");
    const resultBlock = model.requests[1]?.messages.at(-1)?.content[0];
    expect(resultBlock).toMatchObject({ type: "tool_result", toolUseId: "cut", isError: true });
    expect(JSON.stringify(resultBlock)).toMatch(/cut off/);
  });

  it("ends with limit_tokens when a text answer is cut off", async () => {
    const { result } = await run({
      version: 1,
      turns: [{ ...text("a long answ"), stopReason: "max_tokens" }],
    });
    expect(result).toMatchObject({ status: "limit_tokens", exitCode: 5 });
    expect(result.fix).toMatch(/maxOutputTokens/);
  });

  it("stops at maxTurns with exit code 5", async () => {
    const { result, toolset } = await run(
      {
        version: 1,
        turns: [
          { content: [tool("exec")] },
          { content: [tool("exec")] },
          { content: [tool("exec")] },
        ],
      },
      { limits: { maxTurns: 2 } },
    );
    expect(result).toMatchObject({ status: "limit_turns", exitCode: 5, turns: 2 });
    expect(toolset.calls).toHaveLength(2);
    expect(result.message).toMatch(/2 model turns/);
  });

  it("stops when the token budget is spent", async () => {
    const { result } = await run(
      {
        version: 1,
        turns: [
          { content: [tool("exec")], usage: { inputTokens: 600, outputTokens: 500 } },
          text("never"),
        ],
      },
      { limits: { maxTokens: 1000 } },
    );
    expect(result).toMatchObject({ status: "limit_tokens", turns: 1 });
  });

  it("sums input/output usage and keeps cache figures of the last call only", async () => {
    const { result } = await run({
      version: 1,
      turns: [
        {
          content: [tool("exec")],
          usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 100, cacheWriteTokens: 50 },
        },
        {
          ...text("ok"),
          usage: { inputTokens: 20, outputTokens: 7, cacheReadTokens: 150, cacheWriteTokens: 0 },
        },
      ],
    });
    expect(result.usage).toEqual({
      inputTokens: 30,
      outputTokens: 12,
      cacheReadTokens: 150,
      cacheWriteTokens: 0,
    });
  });

  it("retries a transient error once, then falls back to the next model", async () => {
    const { result, model, events } = await run(
      {
        version: 1,
        turns: [
          { error: { kind: "overloaded" } },
          { error: { kind: "overloaded" } },
          text("answer from the fallback"),
        ],
      },
      { fallbackModels: [{ modelId: "fallback" }] },
    );
    expect(result.status).toBe("completed");
    expect(model.requests.map((r) => r.model)).toEqual(["primary", "primary", "fallback"]);
    expect(events.filter((e) => e.type === "retry")).toHaveLength(1);
    expect(events.find((e) => e.type === "fallback")).toMatchObject({
      from: "primary",
      to: "fallback",
    });
  });

  it("ends with model_error, a sentence and a fix, when retries and fallbacks are spent", async () => {
    const { result } = await run({
      version: 1,
      turns: [{ error: { kind: "rate_limited" } }, { error: { kind: "rate_limited" } }],
    });
    expect(result).toMatchObject({ status: "model_error", exitCode: 4 });
    expect(result.message).toMatch(/\.$/);
    expect(result.fix).toMatch(/rate limit/);
  });

  it("never retries or falls back on billing errors", async () => {
    const { result, model } = await run(
      { version: 1, turns: [{ error: { kind: "billing", message: "credit balance too low" } }] },
      { fallbackModels: [{ modelId: "fallback" }] },
    );
    expect(result.status).toBe("model_error");
    expect(model.requests).toHaveLength(1);
  });

  it("compacts on context overflow, keeping recent turns, and goes on", async () => {
    const session = await openSession();
    for (let i = 0; i < 6; i++) {
      await session.append({
        role: "user",
        content: [{ type: "text", text: `old ${i} ${"x".repeat(400)}` }],
      });
      await session.append({ role: "assistant", content: [{ type: "text", text: `reply ${i}` }] });
    }
    const { result, model, events } = await run(
      {
        version: 1,
        turns: [
          { error: { kind: "context_overflow", message: "prompt is too long" } },
          text("SUMMARY: six old exchanges"),
          text("continuing after compaction"),
        ],
      },
      { session },
    );
    expect(result.status).toBe("completed");
    const compaction = events.find((e) => e.type === "compaction");
    expect(compaction).toMatchObject({ type: "compaction" });
    const after = model.requests[2]?.messages ?? [];
    expect(JSON.stringify(after[0])).toMatch(/SUMMARY: six old exchanges/);
    expect(after.length).toBeLessThan(model.requests[0]?.messages.length ?? 0);
    // The current prompt is among the kept recent messages.
    expect(JSON.stringify(after)).toMatch(/do the task/);
    // The compaction is durable.
    const reopened = await JsonlSession.open({ stateDir, sessionKey: session.sessionKey });
    sessions.push(reopened);
    expect(JSON.stringify(reopened.messages()[0])).toMatch(/SUMMARY/);
  });

  it("compacts before sending a request the context window would not hold", async () => {
    const session = await openSession();
    for (let i = 0; i < 6; i++) {
      await session.append({ role: "user", content: [{ type: "text", text: "x".repeat(4000) }] });
      await session.append({ role: "assistant", content: [{ type: "text", text: `reply ${i}` }] });
    }
    const { result, model, events } = await run(
      {
        version: 1,
        turns: [
          text("SUMMARY part 1"),
          text("SUMMARY part 2"),
          text("SUMMARY part 3"),
          text("MERGED SUMMARY"),
          text("answered within the window"),
        ],
      },
      { session, limits: { contextWindowTokens: 7000, maxOutputTokens: 2000 } },
    );
    expect(result.status).toBe("completed");
    // The first requests sent were the summary calls: nothing went out that would not have fit.
    // Three chunks of the older turns (each under 40% of the window), then their merge.
    expect(model.requests.slice(0, 4).map((r) => r.system)).toEqual(
      Array(4).fill(expect.stringMatching(/summarise/)),
    );
    expect(JSON.stringify(model.requests[3]?.messages)).toMatch(/Part 3:\\nSUMMARY part 3/);
    expect(events.filter((e) => e.type === "compaction")).toMatchObject([{ chunks: 3 }]);
    const next = model.requests[4]?.messages ?? [];
    expect(JSON.stringify(next[0])).toMatch(/MERGED SUMMARY/);
    expect(JSON.stringify(next.at(-1))).toMatch(/do the task/);
  });

  it("reports a role-ordering error with its own message, without falling back", async () => {
    const { result, model, events } = await run(
      {
        version: 1,
        turns: [
          {
            error: {
              kind: "invalid_request",
              message: 'messages: roles must alternate between "user" and "assistant"',
            },
          },
        ],
      },
      { fallbackModels: [{ modelId: "backup" }] },
    );
    expect(result).toMatchObject({ status: "model_error", exitCode: 4 });
    expect(result.message).toMatch(/out of order/);
    expect(result.fix).not.toMatch(/model name/);
    expect(events.some((e) => e.type === "fallback")).toBe(false);
    expect(model.requests).toHaveLength(1);
  });

  it("resets the session once when three compactions fail, then gives up with context_overflow", async () => {
    const session = await openSession();
    await session.append({ role: "user", content: [{ type: "text", text: "EARLIER-MESSAGE" }] });
    await session.append({ role: "assistant", content: [{ type: "text", text: "ok" }] });
    const { result, model, events } = await run(
      {
        version: 1,
        turns: [
          { error: { kind: "context_overflow" } },
          // Three compaction attempts, each keeping less; every summary call fails too.
          { error: { kind: "context_overflow" } },
          { error: { kind: "context_overflow" } },
          { error: { kind: "context_overflow" } },
          { error: { kind: "context_overflow" } }, // after the reset
        ],
      },
      { session },
    );
    const reset = events.find((e) => e.type === "session-reset");
    // The user is told what happened and how to avoid it.
    expect(reset?.type === "session-reset" && reset.message).toMatch(/dropped.*--session NAME/s);
    const afterReset = model.requests[4]?.messages ?? [];
    expect(JSON.stringify(afterReset)).toMatch(/dropped/);
    expect(JSON.stringify(afterReset)).toMatch(/do the task/);
    expect(JSON.stringify(afterReset)).not.toMatch(/EARLIER-MESSAGE/);
    expect(result).toMatchObject({ status: "context_overflow", exitCode: 4 });
    expect(result.fix).toMatch(/--session/);
  });

  it("drops thinking once when the API rejects it", async () => {
    const { result, model, events } = await run(
      {
        version: 1,
        turns: [
          {
            error: { kind: "invalid_request", message: "thinking is not supported by this model" },
          },
          text("fine"),
        ],
      },
      { thinking: { budgetTokens: 2048 } },
    );
    expect(result.status).toBe("completed");
    expect(model.requests[0]?.thinking).toEqual({ budgetTokens: 2048 });
    expect(model.requests[1]?.thinking).toBeUndefined();
    expect(events.some((e) => e.type === "thinking-downgrade")).toBe(true);
  });

  it("steps a thinking level down one level per rejection, with an event per step", async () => {
    const rejected = {
      error: { kind: "invalid_request" as const, message: "thinking: budget_tokens too large" },
    };
    const { result, model, events } = await run(
      { version: 1, turns: [rejected, rejected, text("thought less")] },
      { thinking: "high" },
    );
    expect(result.status).toBe("completed");
    expect(model.requests.map((r) => r.thinking?.budgetTokens)).toEqual([24_000, 10_000, 4096]);
    // max_tokens grows to fit the budget and still leave room for the answer.
    expect(model.requests[0]?.maxTokens).toBe(28_096);
    expect(events.filter((e) => e.type === "thinking-downgrade")).toMatchObject([
      { to: "medium" },
      { to: "low" },
    ]);
  });

  it("stops a tool call past its timeout, tells the model and goes on", async () => {
    const toolset = fakeToolset();
    const { result, events, session } = await run(
      { version: 1, turns: [{ content: [tool("slow", {}, "s1")] }, text("too slow, moving on")] },
      { toolset, limits: { toolTimeoutMs: 20 } },
    );
    expect(result.status).toBe("completed");
    // The tool saw its signal fire (the real exec tool kills its command on it).
    expect(toolset.abortedCalls).toEqual(["s1"]);
    expect(events.find((e) => e.type === "tool-timeout")).toMatchObject({
      toolCallId: "s1",
      name: "slow",
    });
    const answer = session
      .messages()
      .flatMap((m): readonly ContentBlock[] => m.content)
      .find((b): b is ToolResultBlock => b.type === "tool_result");
    expect(answer).toMatchObject({ toolUseId: "s1", isError: true });
    expect(JSON.stringify(answer)).toMatch(/stopped after .*tools\.callTimeoutSec/);
  });

  it("aborts mid-tool: the tool sees the signal and the session stays consistent", async () => {
    const controller = new AbortController();
    const toolset = fakeToolset({ onCall: () => setImmediate(() => controller.abort()) });
    const { result, session } = await run(
      { version: 1, turns: [{ content: [tool("slow", {}, "s1"), tool("exec", {}, "e1")] }] },
      { io: { signal: controller.signal }, toolset },
    );
    expect(result).toMatchObject({ status: "aborted", exitCode: 130 });
    expect(result.fix).toMatch(/--session/);
    expect(toolset.abortedCalls).toEqual(["s1"]);
    expect(toolset.calls.map((c) => c.name)).toEqual(["slow"]);
    expect(session.openToolUses()).toEqual([]);
    const results = session
      .messages()
      .flatMap((m): readonly ContentBlock[] => m.content)
      .filter((b): b is ToolResultBlock => b.type === "tool_result");
    expect(results.map((r) => [r.toolUseId, r.isError])).toEqual([
      ["s1", true],
      ["e1", true],
    ]);
    // The session continues: the next run sees a valid transcript.
    const next = await run({ version: 1, turns: [text("resumed")] }, { session, prompt: "go on" });
    expect(next.result.status).toBe("completed");
  });

  it("aborts a model stream and records nothing half-done", async () => {
    const controller = new AbortController();
    const { result, session } = await run(
      { version: 1, turns: [{ waitForAbort: true }] },
      {
        io: {
          signal: controller.signal,
          onEvent: (e) => {
            if (e.type === "model-start") setImmediate(() => controller.abort());
          },
        },
      },
    );
    expect(result.status).toBe("aborted");
    expect(session.messages().map((m) => m.role)).toEqual(["user"]);
  });

  it("times out with status timeout and exit code 6", async () => {
    const { result } = await run(
      { version: 1, turns: [{ waitForAbort: true }] },
      { limits: { timeoutMs: 5 } },
    );
    expect(result).toMatchObject({ status: "timeout", exitCode: 6 });
  });

  it("steering skips the remaining calls of a turn and delivers the message", async () => {
    const steering = new MessageQueue();
    const toolset = fakeToolset({ onCall: () => steering.push("stop, use the other file") });
    const { result, model } = await run(
      {
        version: 1,
        turns: [{ content: [tool("exec", {}, "a"), tool("exec", {}, "b")] }, text("switching")],
      },
      { io: { steering }, toolset },
    );
    expect(result.status).toBe("completed");
    expect(toolset.calls.map((c) => c.toolCallId)).toEqual(["a"]);
    const sent = JSON.stringify(model.requests[1]?.messages);
    expect(sent).toMatch(/Skipped: the user sent a new message/);
    expect(sent).toMatch(/stop, use the other file/);
  });

  it("delivers follow-ups when the model would stop", async () => {
    const followUps = new MessageQueue();
    followUps.push("and add a test");
    const { result, model } = await run(
      { version: 1, turns: [text("done"), text("test added")] },
      { io: { followUps } },
    );
    expect(result).toMatchObject({ status: "completed", turns: 2, finalText: "test added" });
    expect(JSON.stringify(model.requests[1]?.messages.at(-1))).toMatch(/and add a test/);
  });

  it("takes any message source, and one that throws as no messages", async () => {
    let drains = 0;
    const steering = {
      drain: () => {
        drains += 1;
        throw new Error("embedder bug");
      },
    };
    const once = [[{ type: "text" as const, text: "and add a test" }]];
    const followUps = { drain: () => once.splice(0) };
    const { result, model } = await run(
      { version: 1, turns: [{ content: [tool("exec")] }, text("done"), text("test added")] },
      { io: { steering, followUps } },
    );
    expect(result).toMatchObject({ status: "completed", turns: 3, finalText: "test added" });
    expect(drains).toBeGreaterThan(0);
    expect(JSON.stringify(model.requests[2]?.messages.at(-1))).toMatch(/and add a test/);
  });

  it("continues a session after a crash that tore the last line mid-turn", async () => {
    const first = await openSession("agent:main:crash");
    await first.append({ role: "user", content: [{ type: "text", text: "build" }] });
    await first.append({
      role: "assistant",
      content: [{ type: "tool_use", id: "t1", name: "exec", input: {} }],
    });
    await first.close();
    sessions.splice(sessions.indexOf(first), 1);
    // SIGKILL while writing the tool result.
    await appendFile(sessionFilePath(stateDir, "agent:main:crash"), '{"v":1,"ts":"x","role":"us');

    const session = await openSession("agent:main:crash");
    const { result, model } = await run(
      { version: 1, turns: [text("recovered")] },
      { session, prompt: "continue" },
    );
    expect(result.status).toBe("completed");
    const sent = model.requests[0]?.messages ?? [];
    expect(sent.map((m) => m.role)).toEqual(["user", "assistant", "user", "user"]);
    expect(sent[2]?.content[0]).toMatchObject({ toolUseId: "t1", isError: true });
    const file = await readFile(sessionFilePath(stateDir, "agent:main:crash"), "utf8");
    expect(file.endsWith("\n")).toBe(true);
    for (const line of file.trim().split("\n"))
      expect(() => JSON.parse(line) as unknown).not.toThrow();
  });

  it("ends on a refusal with exit code 4", async () => {
    const { result } = await run({
      version: 1,
      turns: [{ ...text("I can't help with that."), stopReason: "refusal" }],
    });
    expect(result).toMatchObject({ status: "refusal", exitCode: 4 });
  });

  it("continues a paused turn by sending the conversation back", async () => {
    const { result, model } = await run({
      version: 1,
      turns: [{ ...text("part one"), stopReason: "pause_turn" }, text("part two")],
    });
    expect(result.status).toBe("completed");
    expect(model.requests[1]?.messages.at(-1)?.role).toBe("assistant");
  });

  it("keeps running when an event listener throws", async () => {
    const { result } = await run(
      { version: 1, turns: [text("ok")] },
      {
        io: {
          onEvent: () => {
            throw new Error("listener bug");
          },
        },
      },
    );
    expect(result.status).toBe("completed");
  });
});
