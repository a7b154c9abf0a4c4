import { describe, expect, it } from "vitest";

import type { FixTestsResult, TestRun } from "./fix-tests.js";
import { renderSummary } from "./summary.js";

const run = (exitCode: number, ran: number): TestRun => ({
  exitCode,
  timedOut: false,
  outputTail: `Ran ${ran} tests in 0.001s\n\nOK\n`,
  counts: [{ runner: "unittest", ran }],
  countsNotRead: [],
  durationMs: 10,
});

function result(overrides: Partial<FixTestsResult>): FixTestsResult {
  return {
    status: "fixed",
    exitCode: 0,
    message: "Fixed: the tests pass on a clean copy with the patch.",
    testCommand: "python3 -m unittest",
    sessionKey: "fix-tests-1",
    before: run(1, 3),
    agent: {
      status: "completed",
      exitCode: 0,
      turns: 3,
      usage: { inputTokens: 100, outputTokens: 20 },
      finalText: "Subtracted the discount.",
    },
    verification: run(0, 3),
    filesChanged: [{ path: "pricing.py", change: "modified", binary: false }],
    protectedFiles: [],
    binaryFiles: [],
    testCommandOutputs: [],
    testCommandRanTwice: false,
    restoredFiles: [],
    testCount: { status: "kept", before: 3, after: 3, message: "3 tests before, 3 after" },
    durationsMs: { setup: 1000, outputs: 300, agent: 2000, verify: 1000, total: 4300 },
    artifacts: [],
    ...overrides,
  } as FixTestsResult;
}

describe("renderSummary", () => {
  it("says why a fix is verified: both runs, the patch, the count", () => {
    const text = renderSummary(result({}));
    expect(text).toContain("## cordon fix-tests: ✅ Fixed and verified");
    expect(text).toContain("- before the agent: the tests exited 1; 3 test(s) ran (unittest)");
    expect(text).toContain(
      "- the patch: 1 file(s); no test, harness, CI or lockfile changed; no binary file",
    );
    expect(text).toContain(
      "- verification on a clean copy with the patch: the tests exited 0; 3 test(s) ran (unittest)",
    );
    expect(text).toContain("- test count: 3 tests before, 3 after");
    expect(text).toContain("- `pricing.py` (modified)");
  });

  it("marks a dropped count and a count not checked", () => {
    const dropped = renderSummary(
      result({
        status: "verification_failed",
        testCount: { status: "dropped", before: 3, after: 2, message: "3 tests before, 2 after" },
      }),
    );
    expect(dropped).toContain("## cordon fix-tests: ❌ Verification failed");
    expect(dropped).toContain("- test count: ❌ 3 tests before, 2 after");
    const unknown = renderSummary(
      result({ testCount: { status: "not_checked", message: "test count not checked: …" } }),
    );
    expect(unknown).toContain("- test count: ⚠️ test count not checked");
  });

  it("lists what the test command wrote as left out of the patch, a long list counted", () => {
    const outputs = Array.from({ length: 12 }, (_, at) => `build/obj${at}.o`);
    const text = renderSummary(result({ testCommandOutputs: outputs }));
    expect(text).toContain(
      "Left out of the patch, written by the test command itself: `build/obj0.o`",
    );
    expect(text).toContain("`build/obj7.o` and 4 more.");
    expect(text).not.toContain("build/obj8.o");
  });

  it("lists a directory the test command created as one entry, says a second run and its cost", () => {
    const text = renderSummary(
      result({ testCommandOutputs: ["CMakeCache.txt", "_build/"], testCommandRanTwice: true }),
    );
    expect(text).toContain(
      "Left out of the patch, written by the test command itself (it ran twice before the agent, to see what a rebuild writes too): `CMakeCache.txt`, `_build/`.",
    );
    expect(text).toContain("4.3s (setup 1.0s, test outputs 0.3s, agent 2.0s, verify 1.0s)");
  });

  it("names what the harness restore put back for verification", () => {
    const text = renderSummary(result({ restoredFiles: ["Makefile"] }));
    expect(text).toContain(
      "- Restored from the base before verification (the test harness): `Makefile`",
    );
  });

  it("fits one screen before the folded test output", () => {
    const text = renderSummary(result({}));
    const beforeOutput = text.slice(0, text.indexOf("<details>"));
    expect(beforeOutput.split("\n").length).toBeLessThanOrEqual(30);
  });

  it("says plainly what was counted for Go without -v, and which runner's count was not read", () => {
    const goRun = (exitCode: number): TestRun => ({
      exitCode,
      timedOut: false,
      outputTail: "ok  \texample.com/calc/stats\t0.002s\n",
      counts: [{ runner: "go test (packages)", ran: 2, unit: "packages" }],
      countsNotRead: [],
      durationMs: 10,
    });
    const go = renderSummary(result({ before: goRun(1), verification: goRun(0) }));
    expect(go).toContain(
      "- before the agent: the tests exited 1; 2 package(s) ran their tests (go test (packages))",
    );
    const notRead = renderSummary(
      result({
        before: { ...run(1, 3), counts: [], countsNotRead: ["pytest"] },
        testCount: {
          status: "not_checked",
          message:
            "test count not checked: pytest ran before the agent but printed no count cordon reads",
          notRead: ["pytest"],
        },
      }),
    );
    expect(notRead).toContain(
      "- before the agent: the tests exited 1; ⚠️ no count read from pytest",
    );
    expect(notRead).toContain(
      "- test count: ⚠️ test count not checked: pytest ran before the agent but printed no count cordon reads",
    );
  });
});
