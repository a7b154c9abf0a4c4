import { describe, expect, it } from "vitest";

import { formatRuns, type RunningRun } from "./ps.js";

const run: RunningRun = {
  sessionKey: "agent:main:fix-the-flaky-test",
  runId: "5d0c7a9e-1111-4222-8333-944455556666",
  workspace: "/home/dev/projects/payments-service",
  pid: 4242,
  host: "elsewhere",
  since: new Date(Date.now() - 120_000).toISOString(),
  state: "running",
  sandbox: "cordon-payments-session-agent-main-fix-the-flaky-test-1a2b3c4d5e6f",
  turns: 7,
  egressRefused: 0,
  doing: "exec: npm test",
  output: "  ✓ refunds a partial capture (12 ms)",
};

describe("cordon ps's table", () => {
  it("is whole in a pipe or with --wide", () => {
    const table = formatRuns([run], undefined);
    expect(table).toContain("/home/dev/projects/payments-service");
    expect(table).toContain("4242@elsewhere");
  });

  it("fits a terminal: the workspace and counts go first, what the run is doing stays", () => {
    const table = formatRuns([run], 100);
    const lines = table.trimEnd().split("\n");
    expect(Math.max(...lines.map((line) => line.length))).toBeLessThanOrEqual(100);
    expect(lines[0]).not.toContain("WORKSPACE");
    expect(lines[0]).toContain("DOING");
    expect(lines[1]).toContain("exec: npm test");
  });
});
