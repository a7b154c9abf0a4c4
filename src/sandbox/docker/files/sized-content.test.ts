import { describe, expect, it } from "vitest";

import { SizedContent } from "./sized-content.js";

const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString();

describe("SizedContent", () => {
  it("reads the size line, even split across chunks, then the bytes", () => {
    const content = new SizedContent(100);
    for (const piece of ["1", "1\nhello", " ", "world"]) content.push(Buffer.from(piece));
    expect(text(content.bytes())).toBe("hello world");
    expect(content.overflowed).toBe(false);
  });

  it("returns what came when the file shrank while being read", () => {
    const content = new SizedContent(100);
    content.push(Buffer.from("10\nabc"));
    expect(text(content.bytes())).toBe("abc");
  });

  it("keeps growth within the limit and flags growth past it", () => {
    const grown = new SizedContent(10);
    grown.push(Buffer.from("3\nabcdef"));
    expect(text(grown.bytes())).toBe("abcdef");
    expect(grown.overflowed).toBe(false);
    const tooMuch = new SizedContent(5);
    tooMuch.push(Buffer.from("3\nabcdef"));
    expect(tooMuch.overflowed).toBe(true);
  });

  it("handles an empty file", () => {
    const content = new SizedContent(10);
    content.push(Buffer.from("0\n"));
    expect(content.bytes().byteLength).toBe(0);
  });
});
