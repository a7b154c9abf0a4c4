import { sumOf, type TestCountParser } from "./parser.js";

/**
 * Python's unittest: `Ran 5 tests in 0.001s`, then a blank line and the verdict,
 * `OK`, `OK (skipped=1)` or `FAILED (failures=1, errors=1, skipped=1)`. Skipped tests are in the
 * "Ran" number, so they are taken off it.
 */
export const unittestParser: TestCountParser = {
  runner: "unittest",
  count(lines) {
    const counts: number[] = [];
    lines.forEach((line, at) => {
      const ran = /^Ran (\d+) tests? in [\d.]+s$/.exec(line);
      if (!ran) return;
      const verdict = lines
        .slice(at + 1, at + 4)
        .find((next) => /^(OK|FAILED|NO TESTS RAN)\b/.test(next));
      const skipped = /skipped=(\d+)/.exec(verdict ?? "");
      counts.push(Number(ran[1]) - (skipped ? Number(skipped[1]) : 0));
    });
    return sumOf(counts);
  },
};
