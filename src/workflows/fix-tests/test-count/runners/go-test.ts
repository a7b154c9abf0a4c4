import type { TestCountParser } from "./parser.js";

/**
 * `go test -v`: one `--- PASS: TestAdd (0.00s)` / `--- FAIL:` / `--- SKIP:` line per test and
 * subtest (indented). Without `-v` go test names only the failures, which is no count, so the
 * output must show the `=== RUN` lines of verbose mode to be counted.
 */
export const goTestParser: TestCountParser = {
  runner: "go test",
  count(lines) {
    if (!lines.some((line) => line.startsWith("=== RUN "))) return undefined;
    return lines.filter((line) => /^\s*--- (?:PASS|FAIL): \S/.test(line)).length;
  },
};
