import { describe, expect, it } from "vitest";

import { plain } from "./colors.js";
import { decideOutput } from "./output-streams.js";

const tty = (columns = 80) => ({ isTTY: true, hasColors: () => true, columns });
const pipe = { isTTY: false };

describe("deciding what each output stream is", () => {
  it("a terminal on both: cursor codes, its width and colour on each", () => {
    const { terminal, paint } = decideOutput({ stdout: tty(), stderr: tty(100) }, {});
    expect(terminal?.stdout).toBe(true);
    expect(terminal?.stderr).toBe(true);
    expect(terminal?.columns()).toBe(100);
    expect(paint.stdout("red", "x")).toBe("\u001b[31mx\u001b[39m");
  });

  it("stdout into a pipe: only stderr is a terminal, and only it is coloured", () => {
    const { terminal, paint } = decideOutput({ stdout: pipe, stderr: tty() }, {});
    expect(terminal).toMatchObject({ stdout: false, stderr: true });
    expect(paint.stdout).toBe(plain);
    expect(paint.stderr).not.toBe(plain);
  });

  it("reads the width when asked: a resized terminal is fitted anew", () => {
    const stderr = tty(80);
    const { terminal } = decideOutput({ stdout: pipe, stderr }, {});
    stderr.columns = 40;
    expect(terminal?.columns()).toBe(40);
  });

  it("TERM=dumb and captured output get the plain lines a pipe gets", () => {
    const dumb = decideOutput({ stdout: tty(), stderr: tty() }, { TERM: "dumb" });
    expect(dumb.terminal).toBeUndefined();
    const captured = decideOutput(undefined, {});
    expect(captured.terminal).toBeUndefined();
    expect(captured.paint.stderr).toBe(plain);
    // Colour can still be forced into a capture or a pipe, as FORCE_COLOR promises.
    expect(decideOutput(undefined, { FORCE_COLOR: "1" }).paint.stderr).not.toBe(plain);
  });
});
