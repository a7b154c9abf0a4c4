import { sumOf, type TestCountParser } from "./parser.js";

/**
 * CTest (CMake's runner) ends with `33% tests passed, 2 tests failed out of 3`: the total counts
 * the tests that ran, not those disabled ("Not Run (Disabled)"). A project whose CMake files no
 * longer add a test prints `No tests were found!!!` and exits 0: that is 0 tests, never no count.
 */
const summary = /^\d+% tests passed, \d+ tests? failed out of (\d+)$/;
const noTests = /^No tests were found!!!$/;

export const ctestParser: TestCountParser = {
  runner: "ctest",
  seen: (lines) => lines.some((line) => /^Test project \//.test(line)),
  count(lines) {
    return sumOf(
      lines.flatMap((line) => {
        if (noTests.test(line)) return [0];
        const match = summary.exec(line);
        return match ? [Number(match[1])] : [];
      }),
    );
  },
};
