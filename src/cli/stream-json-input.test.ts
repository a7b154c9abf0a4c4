import { PassThrough } from "node:stream";

import { describe, expect, it } from "vitest";

import { parseUserLine, StreamJsonInput, parseTypedLine } from "./stream-json-input.js";

describe("stream-json user messages", () => {
  it("reads Claude Code's shape: content as a string or as text and image blocks", () => {
    expect(
      parseUserLine(JSON.stringify({ type: "user", message: { role: "user", content: "hi" } })),
    ).toEqual([{ type: "text", text: "hi" }]);
    const blocks = {
      type: "user",
      message: {
        role: "user",
        content: [
          { type: "text", text: "see" },
          { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBO" } },
        ],
      },
    };
    expect(parseUserLine(JSON.stringify(blocks))).toEqual([
      { type: "text", text: "see" },
      { type: "image", mediaType: "image/png", dataBase64: "iVBO" },
    ]);
  });

  it.each([
    ["{", /^not JSON$/],
    [
      '{"type":"assistant","message":{"role":"user","content":"x"}}',
      /^not a user message \(type: /,
    ],
    ['{"type":"user","message":{"role":"user","content":[]}}', /message\.content/],
    ['{"type":"user","message":{"role":"user","content":[{"type":"tool_result"}]}}', /content/],
  ])("refuses %s with one reason", (line, reason) => {
    const result = parseUserLine(line);
    expect("error" in result && result.error).toMatch(reason);
  });

  it("keeps the messages around a bad line, in order, and ends at EOF", async () => {
    const stdin = new PassThrough();
    const errors: string[] = [];
    const input = new StreamJsonInput(stdin, (message) => errors.push(message));
    const line = (text: string) =>
      `${JSON.stringify({ type: "user", message: { role: "user", content: text } })}\n`;
    stdin.end(`${line("one")}\nnot json\n${line("two")}`);
    expect(await input.next()).toEqual([{ type: "text", text: "one" }]);
    expect(await input.next()).toEqual([{ type: "text", text: "two" }]);
    expect(await input.next()).toBeUndefined();
    expect(errors).toEqual(["stdin line 3 skipped: not JSON"]);
  });
});

describe("parseTypedLine (cordon run -i)", () => {
  it("takes a typed line as the message, as typed, without its surrounding space", () => {
    expect(parseTypedLine('  {"type":"user"} is just text \n')).toEqual([
      { type: "text", text: '{"type":"user"} is just text' },
    ]);
  });
});
