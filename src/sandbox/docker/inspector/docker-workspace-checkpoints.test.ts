import { describe, expect, it } from "vitest";

import { SandboxError } from "../../../common/index.js";
import { parseCopyState } from "./docker-workspace-checkpoints.js";

const id = (digit: string): string => digit.repeat(40);

describe("a copy's state as the inspector prints it", () => {
  it("reads the tree id, then the changed files verbatim", () => {
    const raw = Buffer.from(
      `${id("a")}\0:100644 100755 ${id("1")} ${id("1")} M\0run.sh\0:100644 000000 ${id("2")} ${id("0")} D\0a b\nc\0`,
    );
    const state = parseCopyState(raw);
    expect(state.tree).toBe(id("a"));
    expect([...state.changed]).toEqual([
      ["run.sh", `100755 ${id("1")}`],
      ["a b\nc", "deleted"],
    ]);
    expect(parseCopyState(Buffer.from(`${id("b")}\0`)).changed.size).toBe(0);
  });

  it.each([
    ["no tree id", ""],
    ["a ref instead of an id", "HEAD\0"],
    ["an option", "--upload-pack=x\0"],
    ["no terminator", id("a")],
    ["a malformed entry", `${id("a")}\0:bogus\0file\0`],
  ])("refuses %s", (_what, output) => {
    expect(() => parseCopyState(Buffer.from(output))).toThrow(SandboxError);
  });
});
