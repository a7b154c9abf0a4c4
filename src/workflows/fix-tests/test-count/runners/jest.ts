import { countOf, sumOf, type TestCountParser } from "./parser.js";

/** Jest's summary: `Tests:       1 failed, 1 skipped, 1 todo, 2 passed, 5 total`. */
const summary = /^Tests:\s+(.*\d+ total)$/;

export const jestParser: TestCountParser = {
  runner: "jest",
  seen: (lines) => lines.some((line) => /^Test Suites: /.test(line.trim())),
  count(lines) {
    return sumOf(
      lines.flatMap((line) => {
        const text = summary.exec(line.trim())?.[1];
        return text === undefined ? [] : [countOf(text, /passed/) + countOf(text, /failed/)];
      }),
    );
  },
};
