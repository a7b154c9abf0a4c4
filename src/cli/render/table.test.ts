import { describe, expect, it } from "vitest";

import { fitTable, formatTable, wrapText } from "./table.js";

const header = ["NAME", "STATE", "KEY", "CREATED"];
const rows = [
  [
    "cordon-api-session-agent-main-fix-1a2b3c4d5e6f",
    "running",
    "session:agent:main:fix@9d92a81f",
    "5m ago",
  ],
  [
    "cordon-web-session-agent-main-main-5e6f7a8b9c0d",
    "exited",
    "session:agent:main:main@0c1d2e3f",
    "2h ago",
  ],
];

describe("a table on a terminal", () => {
  it("is whole without a width (a pipe, --wide)", () => {
    expect(fitTable(header, rows, { width: undefined, dropFirst: ["KEY"] })).toBe(
      formatTable(header, rows),
    );
  });

  it("leaves out the least useful columns first, then cuts the widest column's cells", () => {
    const dropped = fitTable(header, rows, { width: 70, dropFirst: ["KEY", "CREATED"] });
    expect(dropped.split("\n")[0]).toBe(
      "NAME                                             STATE    CREATED",
    );
    expect(Math.max(...dropped.split("\n").map((line) => line.length))).toBeLessThanOrEqual(70);

    const cut = fitTable(header, rows, { width: 40, dropFirst: ["KEY", "CREATED"] });
    const lines = cut.trimEnd().split("\n");
    expect(lines[1]).toMatch(/^cordon-api-session-agent-main-… {2}running$/);
    expect(Math.max(...lines.map((line) => line.length))).toBeLessThanOrEqual(40);
  });
});

describe("a sentence beside a label", () => {
  it("wraps at spaces under its own column on a terminal, and stays one line in a pipe", () => {
    const text = "the resident executor is not built, so every call opens a Docker exec";
    expect(wrapText(text, 40, 10)).toBe(
      "the resident executor is not\n          built, so every call opens a\n          Docker exec",
    );
    expect(wrapText(text, undefined, 10)).toBe(text);
    // A word longer than the room (a path) stays whole.
    expect(wrapText(`see ${"/x".repeat(30)} now`, 40, 10).split("\n")[1]).toBe(
      `          ${"/x".repeat(30)}`,
    );
  });

  it("cuts a free-text column to its limit before leaving out any column", () => {
    const doing = [
      [
        "fix",
        "12%",
        "running exec npm test -- --runInBand --coverage --verbose › PASS src/a.test.js",
      ],
    ];
    const fitted = fitTable(["SESSION", "CPU", "DOING"], doing, {
      width: 55,
      dropFirst: ["CPU"],
      cutFirst: { DOING: 40 },
    });
    const [, line] = fitted.split("\n");
    expect(line).toBe(`fix      12%  ${"running exec npm test -- --runInBand --".padEnd(39)}…`);
    // Fits already: nothing is cut.
    const whole = fitTable(["SESSION", "CPU", "DOING"], doing, {
      width: 200,
      dropFirst: ["CPU"],
      cutFirst: { DOING: 40 },
    });
    expect(whole).toBe(formatTable(["SESSION", "CPU", "DOING"], doing));
  });
});
