import { describe, expect, it } from "vitest";

import { checkTestCount } from "./check-count.js";

const unittest = (ran: number) => [{ runner: "unittest", ran }];

describe("checkTestCount", () => {
  it("a drop names both counts", () => {
    expect(checkTestCount(unittest(12), unittest(11))).toEqual({
      status: "dropped",
      before: 12,
      after: 11,
      message: "12 tests before, 11 after",
    });
  });

  it("the same or more tests is kept", () => {
    expect(checkTestCount(unittest(3), unittest(3))).toMatchObject({
      status: "kept",
      message: "3 tests before, 3 after",
    });
    expect(checkTestCount(unittest(3), unittest(4))).toMatchObject({ status: "kept" });
  });

  it("a verification run with no summary after a counted one is a drop", () => {
    expect(checkTestCount(unittest(3), [])).toMatchObject({
      status: "dropped",
      before: 3,
      message: "3 tests before, none counted after: verification printed no test summary",
    });
  });

  it("a runner that lost tests is caught even when another gained as many", () => {
    const before = [
      { runner: "pytest", ran: 10 },
      { runner: "jest", ran: 5 },
    ];
    const after = [
      { runner: "pytest", ran: 15 },
      { runner: "jest", ran: 0 },
    ];
    expect(checkTestCount(before, after)).toMatchObject({
      status: "dropped",
      message: "jest: 5 tests before, 0 after",
    });
  });

  it("no summary before the agent: not checked, and said so", () => {
    const check = checkTestCount([], unittest(3));
    expect(check.status).toBe("not_checked");
    expect(check.message).toMatch(/^test count not checked: .*unittest, pytest/);
  });
});
