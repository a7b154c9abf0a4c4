import { describe, expect, it } from "vitest";
import type { Message } from "../model/index.js";
import { chooseCut } from "./compaction.js";

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
