import { sumOf, type TestCountParser } from "./parser.js";

/**
 * Mocha's spec reporter ends with `  2 passing (8ms)`, then `  1 pending` and `  1 failing` when
 * there are any. Pending tests did not run.
 */
export const mochaParser: TestCountParser = {
  runner: "mocha",
  count(lines) {
    const counts: number[] = [];
    lines.forEach((line, at) => {
      const passing = /^\s*(\d+) passing \(\d+(?:ms|s|m)\)$/.exec(line);
      if (!passing) return;
      const failing = lines
        .slice(at + 1, at + 4)
        .map((next) => /^\s*(\d+) failing$/.exec(next))
        .find((match) => match !== null);
      counts.push(Number(passing[1]) + (failing ? Number(failing[1]) : 0));
    });
    return sumOf(counts);
  },
};
