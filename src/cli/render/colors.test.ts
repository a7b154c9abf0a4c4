import { describe, expect, it } from "vitest";

import { colorEnabled, painter, paintPatch, plain } from "./colors.js";

const terminal = { isTTY: true, hasColors: () => true };
const pipe = { isTTY: false };

describe("colour decisions", () => {
  it("colours a terminal that has colours, never a pipe or a file", () => {
    expect(colorEnabled(terminal, {})).toBe(true);
    expect(colorEnabled({ isTTY: true, hasColors: () => false }, {})).toBe(false);
    expect(colorEnabled(pipe, {})).toBe(false);
  });

  it("honours NO_COLOR over everything and FORCE_COLOR into a pipe", () => {
    expect(colorEnabled(terminal, { NO_COLOR: "1" })).toBe(false);
    expect(colorEnabled(terminal, { NO_COLOR: "1", FORCE_COLOR: "1" })).toBe(false);
    expect(colorEnabled(terminal, { NO_COLOR: "" })).toBe(true);
    expect(colorEnabled(pipe, { FORCE_COLOR: "1" })).toBe(true);
    expect(colorEnabled(terminal, { FORCE_COLOR: "0" })).toBe(false);
    expect(colorEnabled(terminal, { FORCE_COLOR: "false" })).toBe(false);
  });

  it("paints with ANSI codes only when enabled", () => {
    expect(painter(true)("red", "FAIL")).toBe("\u001b[31mFAIL\u001b[39m");
    expect(painter(false)("red", "FAIL")).toBe("FAIL");
    expect(plain(["green", "bold"], "ok")).toBe("ok");
  });
});

describe("a coloured patch", () => {
  const patch = [
    "diff --git a/x.txt b/x.txt",
    "--- a/x.txt",
    "+++ b/x.txt",
    "@@ -1,2 +1,2 @@",
    " same",
    "--- a removed line that looks like a header",
    "+added",
    "",
  ].join("\n");

  it("colours headers, hunks, additions and removals as git does, and nothing when plain", () => {
    const marks = { bold: "\u001b[1m", cyan: "\u001b[36m", green: "\u001b[32m", red: "\u001b[31m" };
    const lines = paintPatch(patch, painter(true)).split("\n");
    expect(lines[0]?.startsWith(marks.bold)).toBe(true);
    expect(lines[2]?.startsWith(marks.bold)).toBe(true);
    expect(lines[3]?.startsWith(marks.cyan)).toBe(true);
    expect(lines[4]).toBe(" same");
    expect(lines[5]?.startsWith(marks.red)).toBe(true);
    expect(lines[6]?.startsWith(marks.green)).toBe(true);
    expect(lines[7]).toBe("");
    expect(paintPatch(patch, plain)).toBe(patch);
  });
});
