import { describe, expect, it } from "vitest";

import type { TestRun } from "./fix-tests.js";
import type { TestCountCheck } from "./test-count/index.js";
import { dependencyFix } from "./dependency-fix.js";
import { failureSignature, verdict } from "./verdict.js";

function run(exitCode: number | null, outputTail: string, ran?: number): TestRun {
  const counts = ran === undefined ? [] : [{ runner: "pytest", ran }];
  return { exitCode, timedOut: false, outputTail, counts, countsNotRead: [], durationMs: 1 };
}

const kept: TestCountCheck = {
  status: "kept",
  before: 4,
  after: 4,
  message: "4 tests before, 4 after",
};
const calc = [{ path: "calc.go", change: "modified" as const, binary: false }];

/** go 1.19's `go test ./...` when the sandbox cannot run the test binary it built. */
function goCannotRun(buildDir: string, seconds: string): string {
  return [
    `fork/exec /tmp/${buildDir}/b001/calc.test: permission denied`,
    `FAIL\texample.com/calc\t${seconds}s`,
    "FAIL",
  ].join("\n");
}

/** pytest 7's report of one failing test. */
function pytestFailure(actual: string, seconds: string): string {
  return [
    "============================= test session starts ==============================",
    "platform linux -- Python 3.11.2, pytest-7.2.1, pluggy-1.0.0+repack",
    "rootdir: /workspace",
    "collected 4 items",
    "",
    "test_calc.py ...F                                                        [100%]",
    "",
    "=================================== FAILURES ===================================",
    "______________________________ test_mean_of_three ______________________________",
    "",
    "    def test_mean_of_three():",
    ">       assert mean([1, 2, 3]) == 2",
    `E       assert ${actual} == 2`,
    `E        +  where ${actual} = mean([1, 2, 3])`,
    "",
    "test_calc.py:12: AssertionError",
    "=========================== short test summary info ============================",
    `FAILED test_calc.py::test_mean_of_three - assert ${actual} == 2`,
    `========================= 1 failed, 3 passed in ${seconds}s ==========================`,
  ].join("\n");
}

describe("verdict", () => {
  it("the same failure as before the agent (other temporary dirs and timings): likely the environment, exit 9 with the fix", () => {
    const found = verdict({
      before: run(1, goCannotRun("go-build2730712386", "0.001")),
      verification: run(1, goCannotRun("go-build884512077", "0.003")),
      testCount: { status: "not_checked", message: "test count not checked" },
      filesChanged: calc,
      restoredFiles: [],
    });
    expect(found).toMatchObject({ status: "same_failure", exitCode: 9 });
    expect(found.message).toMatch(/^The same failure as before the agent: likely the environment/);
    expect(found.message).toMatch(
      /Fix: .*cordon exec.*--carry.*--setup-cmd.*sandbox\.docker\.image/,
    );
    // In the words every fix-tests fix uses for an image (dependency-fix.ts).
    expect(found.message).toContain(
      /use an image that has them (\([^)]*\))/.exec(
        dependencyFix({ projectNames: new Set() }),
      )?.[1],
    );
  });

  it("a failure the patch changed is the patch's: exit 8", () => {
    const found = verdict({
      before: run(1, pytestFailure("1.5", "0.02"), 4),
      verification: run(1, pytestFailure("2.5", "0.03"), 4),
      testCount: kept,
      filesChanged: calc,
      restoredFiles: [],
    });
    expect(found).toEqual({
      status: "verification_failed",
      exitCode: 8,
      message: "The tests still fail on a clean copy with the patch.",
    });
  });

  it("a test failing the same way is the patch's too: it missed the bug, or hid it only in its own copy", () => {
    // The agent deselected the test in pyproject.toml; verification put the base one back.
    const same = {
      before: run(1, pytestFailure("1.5", "0.02"), 4),
      verification: run(1, pytestFailure("1.5", "0.41"), 4),
      testCount: kept,
      filesChanged: calc,
    };
    expect(verdict({ ...same, restoredFiles: ["pyproject.toml"] }).status).toBe(
      "verification_failed",
    );
    expect(verdict({ ...same, restoredFiles: [] }).status).toBe("verification_failed");
  });

  it("the same failure before any test ran, with harness files put back, is the patch's", () => {
    const found = verdict({
      before: run(1, goCannotRun("go-build2730712386", "0.001")),
      verification: run(1, goCannotRun("go-build884512077", "0.003")),
      testCount: kept,
      filesChanged: calc,
      restoredFiles: ["Makefile"],
    });
    expect(found.status).toBe("verification_failed");
  });

  it("another exit code is another failure", () => {
    const output = goCannotRun("go-build1", "0.001");
    expect(
      verdict({
        before: run(1, output),
        verification: run(2, output),
        testCount: kept,
        filesChanged: calc,
        restoredFiles: [],
      }).status,
    ).toBe("verification_failed");
    expect(
      verdict({
        before: run(1, output),
        verification: run(null, output),
        testCount: kept,
        filesChanged: calc,
        restoredFiles: [],
      }).status,
    ).toBe("verification_failed");
  });

  it("passing tests are fixed unless fewer ran", () => {
    const before = run(1, pytestFailure("1.5", "0.02"));
    expect(
      verdict({
        before,
        verification: run(0, ""),
        testCount: kept,
        filesChanged: calc,
        restoredFiles: [],
      }),
    ).toMatchObject({
      status: "fixed",
      exitCode: 0,
      message:
        "Fixed: the tests pass on a clean copy with the patch (1 file(s) changed; 4 tests before, 4 after).",
    });
    // A count not checked is said with its reason in the verdict itself.
    const notChecked: TestCountCheck = {
      status: "not_checked",
      message:
        "test count not checked: pytest ran before the agent but printed no count cordon reads",
    };
    expect(
      verdict({
        before,
        verification: run(0, ""),
        testCount: notChecked,
        filesChanged: calc,
        restoredFiles: [],
      }).message,
    ).toBe(
      "Fixed: the tests pass on a clean copy with the patch (1 file(s) changed; ⚠️ test count not checked: pytest ran before the agent but printed no count cordon reads).",
    );
    const dropped: TestCountCheck = {
      status: "dropped",
      before: 4,
      after: 3,
      message: "4 tests before, 3 after",
    };
    expect(
      verdict({
        before,
        verification: run(0, ""),
        testCount: dropped,
        filesChanged: calc,
        restoredFiles: [],
      }),
    ).toMatchObject({
      status: "verification_failed",
      exitCode: 8,
    });
  });
});

describe("failureSignature", () => {
  it("ignores where a cut tail starts, clock times, ids and addresses; keeps values and line numbers", () => {
    const long = (prefix: string) =>
      `…(earlier output cut)…\n${prefix}ed line\nok 1 at 12:01:02 pid 48213 0x7ffd5e8a\nnot ok 2 test.js:14`;
    expect(failureSignature(run(1, long("xx")))).toBe(failureSignature(run(1, long("a partial"))));
    expect(failureSignature(run(1, "not ok 2 test.js:14"))).not.toBe(
      failureSignature(run(1, "not ok 2 test.js:15")),
    );
    expect(failureSignature(run(1, "assert 1.5 == 2"))).not.toBe(
      failureSignature(run(1, "assert 2.5 == 2")),
    );
    expect(failureSignature(run(1, "\u001b[31mFAIL\u001b[0m"))).toBe(
      failureSignature(run(1, "FAIL")),
    );
  });
});
