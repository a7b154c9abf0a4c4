import { describe, expect, it } from "vitest";
import { ScriptedModelClient, type Message } from "../model/index.js";
import { chooseCut, compactTranscript, renderForSummary, splitIntoChunks } from "./compaction.js";

const user = (t: string): Message => ({ role: "user", content: [{ type: "text", text: t }] });
const assistant = (t: string): Message => ({
  role: "assistant",
  content: [{ type: "text", text: t }],
});
const result = (id: string): Message => ({
  role: "user",
  content: [
    {
      type: "tool_result",
      toolUseId: id,
      content: [{ type: "text", text: "x".repeat(100) }],
      isError: false,
    },
  ],
});
const call = (id: string): Message => ({
  role: "assistant",
  content: [{ type: "tool_use", id, name: "exec", input: {} }],
});

describe("chooseCut", () => {
  it("keeps the newest share of tokens", () => {
    const messages = Array.from({ length: 10 }, (_, i) =>
      i % 2 === 0 ? user("u".repeat(100)) : assistant("a".repeat(100)),
    );
    const cut = chooseCut(messages, 0.3);
    expect(cut).toBeGreaterThanOrEqual(6);
    expect(cut).toBeLessThan(10);
  });

  it("never starts the kept part with a tool result", () => {
    const messages = [user("u".repeat(400)), call("a"), result("a"), call("b"), result("b")];
    const cut = chooseCut(messages, 0.1);
    expect(cut).toBe(3);
    expect(messages[cut ?? 0]?.role).toBe("assistant");
  });

  it("says when there is nothing older to summarise", () => {
    expect(chooseCut([user("only")], 0.3)).toBeUndefined();
    expect(chooseCut([user("a"), result("x")], 0.01)).toBeUndefined();
  });
});

describe("compactTranscript", () => {
  const items = (messages: Message[]) => messages.map((message, line) => ({ message, line }));

  it("summarises older turns in chunks by token share, merges them, keeps the newest verbatim", async () => {
    const history: Message[] = [];
    for (let i = 0; i < 8; i++) {
      history.push(user(`step ${i}: ${"u".repeat(3000)}`), call(`c${i}`), result(`c${i}`));
      history.push(assistant(`done ${i}`));
    }
    history.push(user("NEWEST: now add the changelog entry"));
    const model = new ScriptedModelClient({
      version: 1,
      turns: Array.from({ length: 20 }, (_, i) => ({
        content: [{ type: "text" as const, text: `summary ${i + 1}` }],
      })),
    });
    const compacted = await compactTranscript({
      model,
      modelId: "m",
      transcript: items(history),
      keepShare: 0.1,
      contextWindowTokens: 4000, // chunks of at most 40% of it: 1600 tokens, 6400 characters
      signal: new AbortController().signal,
    });
    expect(compacted.chunks).toBeGreaterThan(1);
    // One call per chunk, then one that merges the chunk summaries (and sees them all).
    expect(model.requests).toHaveLength(compacted.chunks + 1);
    const merge = JSON.stringify(model.requests.at(-1)?.messages);
    expect(merge).toMatch(/Part 1:\\nsummary 1/);
    expect(merge).toMatch(new RegExp(`Part ${compacted.chunks}:`));
    expect(compacted.summary).toContain(`summary ${compacted.chunks + 1}`);
    // No chunk is over its share, and the requests need no tools (the turns are sent as text).
    for (const request of model.requests.slice(0, -1)) {
      expect(JSON.stringify(request.messages).length).toBeLessThan(6400 + 1500);
      expect(request.tools).toEqual([]);
    }
    expect(compacted.firstKeptLine + compacted.keptMessages).toBe(history.length);
    expect(compacted.firstKeptLine).toBeLessThan(history.length);
  });

  it("cuts a single message over half the window, and tool output to its first characters", () => {
    const huge = user(`HEAD ${"h".repeat(50_000)} TAIL`);
    const chatty: Message = {
      role: "user",
      content: [
        {
          type: "tool_result",
          toolUseId: "t",
          content: [{ type: "text", text: `BEGIN ${"o".repeat(9000)} END-OF-LOG` }],
          isError: false,
        },
      ],
    };
    const rendered = renderForSummary(huge, 8000);
    expect(rendered.length).toBeLessThan(8100);
    expect(rendered).toMatch(/^user: HEAD/);
    expect(rendered).toMatch(/TAIL$/);
    expect(rendered).toMatch(/characters left out/);
    const tool = renderForSummary(chatty, 8000);
    expect(tool.length).toBeLessThan(2200);
    expect(tool).toMatch(/\[tool result\] BEGIN/);
  });

  it("splits rendered messages into chunks in order, never splitting one", () => {
    expect(splitIntoChunks(["aaaa", "bb", "cccc", "d"], 6)).toEqual([
      ["aaaa", "bb"],
      ["cccc", "d"],
    ]);
    expect(splitIntoChunks(["x".repeat(10)], 6)).toEqual([["x".repeat(10)]]);
  });
});
