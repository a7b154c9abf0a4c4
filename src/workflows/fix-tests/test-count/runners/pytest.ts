import { countOf, sumOf, type TestCountParser } from "./parser.js";

/**
 * pytest's last line: `==== 2 failed, 2 passed, 1 skipped in 0.50s ====` (bare with `-q`),
 * `1 error in 0.63s` after a collection error, `no tests ran in 0.01s`. Deselected, skipped and
 * warnings did not run a test; xfailed and xpassed did.
 */
const summary =
  /^=*\s*((?:\d+ (?:passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?|rerun)(?:, )?)+|no tests ran) in [\d.]+s(?: \([^)]*\))?\s*=*$/;

export const pytestParser: TestCountParser = {
  runner: "pytest",
  seen: (lines) => lines.some((line) => /^=+ test session starts =+$/.test(line)),
  count(lines) {
    const counts = lines.flatMap((line) => {
      const match = summary.exec(line);
      if (!match?.[1]) return [];
      const text = match[1];
      return [
        countOf(text, /passed/) +
          countOf(text, /failed/) +
          countOf(text, /errors?/) +
          countOf(text, /xfailed/) +
          countOf(text, /xpassed/),
      ];
    });
    return sumOf(counts);
  },
};
