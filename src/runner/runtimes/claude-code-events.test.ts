import { describe, expect, it } from "vitest";

import type { ExecResult } from "../../sandbox/index.js";
import type { RunnerEvent } from "../orchestrate/index.js";
import { disallowedClaudeCodeTools } from "./claude-code.js";
import { ClaudeCodeEvents } from "./claude-code-events.js";
import { OutputLines } from "./output-lines.js";

const exited = (exitCode: number | null, stderr = ""): ExecResult => ({
  exitCode,
  stdout: "",
  stderr,
  truncated: false,
  timedOut: false,
  oomKilled: false,
  durationMs: 10,
});

/** Lines as Claude Code 2.1 prints them with --output-format stream-json --verbose (trimmed). */
const stream = [
  { type: "system", subtype: "init", model: "claude-test", session_id: "s1", tools: ["Bash"] },
  {
    type: "assistant",
    message: {
      id: "msg_1",
      model: "claude-test",
      content: [{ type: "text", text: "I will write." }],
      usage: { input_tokens: 10, output_tokens: 1 },
    },
  },
  {
    type: "assistant",
    message: {
      id: "msg_1",
      model: "claude-test",
      content: [
        { type: "tool_use", id: "toolu_1", name: "Write", input: { file_path: "/w/b.txt" } },
      ],
      usage: { input_tokens: 10, output_tokens: 1 },
    },
  },
  {
    type: "user",
    message: {
      role: "user",
      content: [{ tool_use_id: "toolu_1", type: "tool_result", content: "File created" }],
    },
  },
  {
    type: "assistant",
    message: { id: "msg_2", model: "claude-test", content: [{ type: "text", text: "Done." }] },
  },
  {
    type: "result",
    subtype: "success",
    is_error: false,
    result: "Done.",
    num_turns: 2,
    usage: { input_tokens: 20, output_tokens: 10, cache_read_input_tokens: 3 },
  },
];

function translate(lines: unknown[]): { events: RunnerEvent[]; parser: ClaudeCodeEvents } {
  const events: RunnerEvent[] = [];
  const parser = new ClaudeCodeEvents((event) => events.push(event));
  const output = new OutputLines((line) => parser.line(line));
  // Split mid-line, as a pipe delivers it.
  const bytes = new TextEncoder().encode(lines.map((line) => JSON.stringify(line)).join("\n"));
  for (let at = 0; at < bytes.length; at += 17) output.push(bytes.subarray(at, at + 17));
  output.end();
  return { events, parser };
}

describe("Claude Code's stream-json as cordon's run events", () => {
  it("turns messages into turns, tool calls and results, and the result line into the outcome", () => {
    const { events, parser } = translate(stream);
    expect(events.map((event) => event.type)).toEqual([
      "model-start",
      "usage",
      "text-delta",
      "tool-call",
      "assistant-message",
      "tool-result",
      "model-start",
      "text-delta",
      "assistant-message",
    ]);
    expect(events[3]).toEqual({
      type: "tool-call",
      toolCallId: "toolu_1",
      name: "Write",
      input: { file_path: "/w/b.txt" },
    });
    expect(events[4]).toMatchObject({ stopReason: "tool_use", turn: 1 });
    expect(events[5]).toEqual({
      type: "tool-result",
      toolCallId: "toolu_1",
      name: "Write",
      isError: false,
      content: [{ type: "text", text: "File created" }],
      skipped: false,
    });
    expect(
      parser.runResult({ runId: "r", sessionKey: "k", startedAt: Date.now() }, exited(0)),
    ).toEqual({
      runId: "r",
      sessionKey: "k",
      durationMs: expect.any(Number) as number,
      model: "claude-test",
      cost: { usd: null, reason: expect.stringContaining('"claude-test"') as string },
      status: "completed",
      exitCode: 0,
      turns: 2,
      usage: { inputTokens: 20, outputTokens: 10, cacheReadTokens: 3, cacheWriteTokens: 0 },
      finalText: "Done.",
    });
  });

  it("ends as cordon's loop would: turns used up, an API error, no claude, a crash", () => {
    const ids = { runId: "r", sessionKey: "k", startedAt: Date.now() };
    const ending = (result: unknown, exec = exited(1)) =>
      translate(result ? [result] : []).parser.runResult(ids, exec);
    expect(ending({ type: "result", subtype: "error_max_turns", is_error: true })).toMatchObject({
      status: "limit_turns",
      exitCode: 5,
    });
    expect(
      ending({
        type: "result",
        subtype: "success",
        is_error: true,
        result: "API Error: 401",
        api_error_status: 401,
      }),
    ).toMatchObject({
      status: "model_error",
      exitCode: 4,
      message: "Claude Code ended with an error (API status 401): API Error: 401",
    });
    expect(ending(undefined, exited(127, "bash: claude: command not found"))).toMatchObject({
      status: "sandbox_error",
      exitCode: 3,
    });
    expect(ending(undefined, exited(null, ""))).toMatchObject({
      status: "internal_error",
      exitCode: 1,
    });
    expect(ending(undefined, { ...exited(null), timedOut: true })).toMatchObject({
      status: "timeout",
      exitCode: 6,
    });
  });

  it("ignores what is not a JSON object (a banner, a half line, hostile text)", () => {
    const { events } = translate(["not json", "{broken", 42, { type: "assistant" }]);
    expect(events.map((event) => event.type)).toEqual(["model-start"]);
  });
});

describe("cordon's tool policy on Claude Code's tools", () => {
  it("keeps the web tools off and turns off the counterparts of denied cordon tools", () => {
    expect(
      disallowedClaudeCodeTools({
        tools: {
          allowed: [
            "exec",
            "read",
            "write",
            "edit",
            "process",
            "ls",
            "find",
            "grep",
            "apply_patch",
          ],
        },
      }),
    ).toEqual(["WebFetch", "WebSearch"]);
    const readOnly = disallowedClaudeCodeTools({
      tools: { allowed: ["read", "ls", "find", "grep"] },
    });
    expect(readOnly).toEqual(expect.arrayContaining(["Bash", "Write", "Edit", "WebFetch"]));
    expect(readOnly).not.toContain("Read");
  });
});
