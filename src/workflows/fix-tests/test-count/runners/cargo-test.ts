import { sumOf, type TestCountParser } from "./parser.js";

/**
 * `cargo test` prints one line per test binary (unit tests, each integration test file, doc
 * tests): `test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; …`.
 */
const summary = /^test result: \w+\. (\d+) passed; (\d+) failed;/;

export const cargoTestParser: TestCountParser = {
  runner: "cargo test",
  seen: (lines) => lines.some((line) => /^running \d+ tests?$/.test(line)),
  count(lines) {
    return sumOf(
      lines.flatMap((line) => {
        const match = summary.exec(line);
        return match ? [Number(match[1]) + Number(match[2])] : [];
      }),
    );
  },
};
