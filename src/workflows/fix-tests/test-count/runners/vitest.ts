import { countOf, sumOf, type TestCountParser } from "./parser.js";

/** Vitest's summary: `      Tests  1 failed | 2 passed | 1 skipped | 1 todo (5)`. */
const summary = /^Tests\s{2,}(.*)\(\d+\)$/;

export const vitestParser: TestCountParser = {
  runner: "vitest",
  seen: (lines) => lines.some((line) => /^Test Files\s{2,}/.test(line.trim())),
  count(lines) {
    return sumOf(
      lines.flatMap((line) => {
        const text = summary.exec(line.trim())?.[1];
        return text === undefined ? [] : [countOf(text, /passed/) + countOf(text, /failed/)];
      }),
    );
  },
};
