import { describe, expect, it } from "vitest";

import { printable, printableLines } from "./printable.js";

describe("printable", () => {
  it("shows every control character, line breaks included, as \\uXXXX", () => {
    expect(printable("a\u001b[2Jb\r\nc\u009bd")).toBe("a\\u001b[2Jb\\u000d\\u000ac\\u009bd");
  });
});

describe("printableLines", () => {
  it("keeps line breaks and tabs, and shows escapes, CR and backspace", () => {
    expect(printableLines("line 1\n\tline 2\u001b]0;owned\u0007\rcordon: fake\b")).toBe(
      "line 1\n\tline 2\\u001b]0;owned\\u0007\\u000dcordon: fake\\u0008",
    );
  });
});
