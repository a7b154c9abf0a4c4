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

describe("checkTestCount says plainly what it could not check", () => {
  const goPackages = (ran: number) => [
    { runner: "go test (packages)", ran, unit: "packages" as const },
  ];

  it("go test without -v: packages are held, and the message says it is packages and how to count tests", () => {
    const kept = checkTestCount(goPackages(2), goPackages(2));
    expect(kept).toMatchObject({ status: "kept", before: 2, after: 2 });
    expect(kept.message).toMatch(/^2 packages before, 2 after; go test without -v .* -v or -json/);
    // The agent removed the only test file of a package.
    const dropped = checkTestCount(goPackages(2), goPackages(1));
    expect(dropped.status).toBe("dropped");
    expect(dropped.message).toMatch(/^2 packages before, 1 after/);
  });

  it("a runner seen before the agent whose count was not read is named, alone or beside others", () => {
    const alone = checkTestCount([], unittest(3), ["pytest"]);
    expect(alone).toEqual({
      status: "not_checked",
      message:
        "test count not checked: pytest ran before the agent but printed no count cordon reads",
      notRead: ["pytest"],
    });
    const beside = checkTestCount(unittest(3), unittest(3), ["jest"]);
    expect(beside).toMatchObject({ status: "kept", notRead: ["jest"] });
    expect(beside.message).toBe(
      "3 tests before, 3 after; not checked: jest (its output before the agent had no count cordon reads)",
    );
  });
});
