import { readFileSync } from "node:fs";
import path from "node:path";

import { describe, expect, it } from "vitest";

import { packageRoot } from "../../../common/index.js";
import { countTests, unreadRunners } from "./count-tests.js";

/** Output captured by running the runner on a small suite (test/fixtures/test-count/README.md). */
const captured = (name: string): string =>
  readFileSync(path.join(packageRoot(), "test", "fixtures", "test-count", name), "utf8");

describe("countTests on real runner output", () => {
  it.each([
    // 5 tests: 2 pass, 1 fails, 1 errors, 1 skipped.
    ["unittest-host.txt", "unittest", 4],
    ["unittest-v-container.txt", "unittest", 4],
    ["unittest-one-test.txt", "unittest", 1],
    ["pytest.txt", "pytest", 4],
    ["pytest-q.txt", "pytest", 4],
    ["pytest-deselect.txt", "pytest", 1],
    ["pytest-collect-error.txt", "pytest", 1],
    // node:test, 5 tests: 2 pass, 1 fails, 1 skipped, 1 todo.
    ["node-test-tap-node18-container.txt", "TAP", 3],
    ["node-test-tap-node20.txt", "TAP", 3],
    ["node-test-spec-node20.txt", "TAP", 3],
    // vitest, 5 tests: 2 pass, 1 fails, 1 skipped, 1 todo; with and without colours.
    ["vitest.txt", "vitest", 3],
    ["vitest-color.txt", "vitest", 3],
    // cargo: 3 unit tests (1 ignored), 1 integration test, 0 doc tests.
    ["cargo.txt", "cargo test", 3],
    // go: TestAdd, TestMean and its two subtests, TestMax, TestMaxOne; TestSlow skipped.
    ["go-test-v.txt", "go test", 6],
    ["go-test-json.txt", "go test", 6],
    // ctest over test/fixtures/fix-tests/semver-cmake: 3 tests, 2 failing; all passing; one disabled.
    ["ctest-fail.txt", "ctest", 3],
    ["ctest-pass.txt", "ctest", 3],
    ["ctest-disabled.txt", "ctest", 2],
    // The tests turned off in the CMake files: ctest exits 0 having run none.
    ["ctest-none.txt", "ctest", 0],
  ])("%s: %s ran %i", (file, runner, ran) => {
    expect(countTests(captured(file))).toEqual([{ runner, ran }]);
  });

  it.each([
    // Without -v: calc (a test named failing) and stats (ok) ran their tests; cmd/calc has none.
    ["go-test.txt", 2],
    ["go-test-cached.txt", 2],
    // stats did not build: only calc ran its tests.
    ["go-test-build-failed.txt", 1],
    // TMPDIR noexec: go could run neither test binary.
    ["go-test-noexec.txt", 0],
  ])("%s: go test without -v counts the packages that ran their tests (%i)", (file, ran) => {
    expect(countTests(captured(file))).toEqual([
      { runner: "go test (packages)", ran, unit: "packages" },
    ]);
    expect(unreadRunners(captured(file))).toEqual([]);
  });

  it("adds up the summaries of a command that runs the runner twice", () => {
    const twice = `${captured("unittest-host.txt")}\n${captured("unittest-one-test.txt")}`;
    expect(countTests(twice)).toEqual([{ runner: "unittest", ran: 5 }]);
  });

  it("keeps the runners of a command that runs two apart", () => {
    const both = `${captured("pytest-q.txt")}\n${captured("vitest.txt")}`;
    expect(countTests(both)).toEqual([
      { runner: "pytest", ran: 4 },
      { runner: "vitest", ran: 3 },
    ]);
  });
});

// Runners not on this machine, from the summary formats their documentation shows.
describe("countTests on documented summary formats", () => {
  it("jest: the Tests: line, skipped and todo left out", () => {
    const output = [
      "Test Suites: 1 failed, 1 passed, 2 total",
      "Tests:       1 failed, 1 skipped, 1 todo, 10 passed, 13 total",
      "Snapshots:   0 total",
      "Time:        1.2 s",
    ].join("\n");
    expect(countTests(output)).toEqual([{ runner: "jest", ran: 11 }]);
  });

  it("mocha: passing plus failing, pending left out", () => {
    const output = ["", "  7 passing (12ms)", "  2 pending", "  1 failing", "", "  1) calc"].join(
      "\n",
    );
    expect(countTests(output)).toEqual([{ runner: "mocha", ran: 8 }]);
  });

  it("go test -v: every PASS and FAIL line, subtests included, SKIP left out", () => {
    const output = [
      "=== RUN   TestAdd",
      "--- PASS: TestAdd (0.00s)",
      "=== RUN   TestTable",
      "=== RUN   TestTable/zero",
      "    calc_test.go:20: got 1, want 0",
      "=== RUN   TestTable/one",
      "--- FAIL: TestTable (0.00s)",
      "    --- FAIL: TestTable/zero (0.00s)",
      "    --- PASS: TestTable/one (0.00s)",
      "=== RUN   TestSlow",
      "    calc_test.go:30: slow",
      "--- SKIP: TestSlow (0.00s)",
      "FAIL",
      "FAIL\texample.com/calc\t0.002s",
    ].join("\n");
    expect(countTests(output)).toEqual([{ runner: "go test", ran: 4 }]);
  });

  it("go test's package lines are tab-separated: TAP's `ok 1 - adds` is not one", () => {
    expect(countTests("ok  \texample.com/calc\t0.002s\n")).toEqual([
      { runner: "go test (packages)", ran: 1, unit: "packages" },
    ]);
    expect(countTests("ok 1 - adds\nok 2 - subtracts\n")).toEqual([]);
  });

  it("plain TAP without summary comments: top-level test points, SKIP and TODO left out", () => {
    const output = [
      "TAP version 13",
      "1..4",
      "ok 1 - adds",
      "not ok 2 - subtracts",
      "ok 3 - multiplies # SKIP not yet",
      "ok 4 - rounds # TODO",
    ].join("\n");
    expect(countTests(output)).toEqual([{ runner: "TAP", ran: 2 }]);
  });
});

describe("countTests on output it does not know", () => {
  it("is empty for a command that prints no runner summary", () => {
    expect(countTests("all tests passed\n")).toEqual([]);
    expect(countTests("")).toEqual([]);
  });

  it("reads a line redrawn with carriage returns as what the terminal shows last", () => {
    expect(countTests("Ran 9 tests in 0.1s\r\n\r\nOK\r\n")).toEqual([
      { runner: "unittest", ran: 9 },
    ]);
    expect(countTests("collecting ... \r3 passed in 0.10s\n")).toEqual([
      { runner: "pytest", ran: 3 },
    ]);
  });
});

describe("unreadRunners: a runner that ran but whose count cannot be read is named", () => {
  it("pytest interrupted before its summary, jest without its Tests: line, cargo without test result:", () => {
    const pytest = [
      "============================= test session starts ==============================",
      "platform linux -- Python 3.11.2, pytest-7.2.1, pluggy-1.0.0+repack",
      "rootdir: /workspace",
      "collected 4 items",
      "",
      "test_calc.py ..",
      "Killed",
    ].join("\n");
    expect(countTests(pytest)).toEqual([]);
    expect(unreadRunners(pytest)).toEqual(["pytest"]);
    expect(unreadRunners("Test Suites: 1 failed, 1 total\nTime:        0.5 s\n")).toEqual(["jest"]);
    expect(unreadRunners("\nrunning 3 tests\nerror: test failed, to rerun pass `--lib`\n")).toEqual(
      ["cargo test"],
    );
  });

  it("a runner whose count was read is not named", () => {
    expect(unreadRunners(captured("pytest-q.txt"))).toEqual([]);
    expect(unreadRunners(captured("pytest.txt"))).toEqual([]);
    expect(unreadRunners(captured("vitest.txt"))).toEqual([]);
    expect(unreadRunners(captured("cargo.txt"))).toEqual([]);
    expect(unreadRunners("all tests passed\n")).toEqual([]);
  });
});
