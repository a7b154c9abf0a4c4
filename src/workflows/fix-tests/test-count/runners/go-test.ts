import { z } from "zod";

import { sumOf, type TestCountParser } from "./parser.js";

/**
 * One event of `go test -json` (test2json): `{"Time":…,"Action":"pass","Package":"example.com/calc",
 * "Test":"TestAdd","Elapsed":0}`. Only what the count needs; other fields are ignored.
 */
const testEvent = z.object({
  Action: z.string(),
  Test: z.string().optional(),
});

/** A test's (or subtest's) own pass or fail event in `-json` output; skips did not run. */
function isRanTestEvent(line: string): boolean {
  if (!line.startsWith("{")) return false;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return false;
  }
  const event = testEvent.safeParse(value);
  return (
    event.success &&
    event.data.Test !== undefined &&
    (event.data.Action === "pass" || event.data.Action === "fail")
  );
}

/**
 * The package lines go test prints with or without -v, tab-separated as cmd/go writes them:
 * `ok  \texample.com/calc\t0.002s`, `FAIL\texample.com/calc\t0.003s`, `?   \tpkg\t[no test files]`
 * (TAP's `ok 1 - adds` is not one).
 */
const packagePassed = /^ok {2}\t\S+\t(?:[\d.]+s|\(cached\))/;
const packageFailed = /^FAIL\t\S+\t[\d.]+s$/;
const packageLine = /^(?:ok {2}|FAIL|\? {3})\t\S+\t/;

/**
 * `go test -v`: one `--- PASS: TestAdd (0.00s)` / `--- FAIL:` / `--- SKIP:` line per test and
 * subtest (indented); `go test -json`: one pass/fail/skip event per test and subtest. Without
 * either go test names only the failures, which is no count of tests (goPackagesParser reads
 * packages then).
 */
export const goTestParser: TestCountParser = {
  runner: "go test",
  count(lines) {
    if (lines.some((line) => line.startsWith("=== RUN "))) {
      return lines.filter((line) => /^\s*--- (?:PASS|FAIL): \S/.test(line)).length;
    }
    const events = lines.filter((line) => line.startsWith('{"'));
    if (events.length === 0) return undefined;
    const ran = events.filter(isRanTestEvent).length;
    // -json output always has test events; a file of other JSON lines is not go's.
    return events.some((line) => line.includes('"Package":')) ? ran : undefined;
  },
};

/**
 * `go test ./...` without -v prints one line per package and names only failing tests:
 * `ok  \texample.com/calc\t0.002s` (or `(cached)`), `--- FAIL: TestMean (0.00s)` then
 * `FAIL\texample.com/calc/stats\t0.003s`, `?   \texample.com/calc/cmd\t[no test files]`. What it
 * shows is how many packages ran their tests: those that passed, and those that failed with a
 * failing test named (a package whose test binary did not build or could not run ran none). A
 * package whose tests were all removed drops out of that count; one test removed from a package
 * does not, which is why -v or -json count tests and this is the fallback.
 */
export const goPackagesParser: TestCountParser = {
  runner: "go test (packages)",
  unit: "packages",
  count(lines) {
    if (lines.some((line) => line.startsWith("=== RUN ") || line.startsWith('{"'))) {
      return undefined;
    }
    const ran: number[] = [];
    let failedTestSeen = false;
    for (const line of lines) {
      if (line.startsWith("--- FAIL: ")) failedTestSeen = true;
      else if (packagePassed.test(line)) ran.push(1);
      else if (packageFailed.test(line) && failedTestSeen) ran.push(1);
      if (packageLine.test(line)) failedTestSeen = false;
    }
    const packagesPrinted = lines.some((line) => packageLine.test(line));
    return packagesPrinted ? (sumOf(ran) ?? 0) : undefined;
  },
};
