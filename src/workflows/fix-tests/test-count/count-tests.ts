import { stripVTControlCharacters } from "node:util";

import { cargoTestParser } from "./runners/cargo-test.js";
import { ctestParser } from "./runners/ctest.js";
import { goPackagesParser, goTestParser } from "./runners/go-test.js";
import { jestParser } from "./runners/jest.js";
import { mochaParser } from "./runners/mocha.js";
import type { TestCountParser } from "./runners/parser.js";
import { pytestParser } from "./runners/pytest.js";
import { tapParser } from "./runners/tap.js";
import { unittestParser } from "./runners/unittest.js";
import { vitestParser } from "./runners/vitest.js";

/** How many tests one runner reported as run (passed, failed or errored; never skipped). */
export interface RunnerCount {
  runner: string;
  ran: number;
  /** Set when `ran` counts something else than tests: Go's packages without -v. */
  unit?: "packages" | undefined;
}

const parsers: readonly TestCountParser[] = [
  unittestParser,
  pytestParser,
  jestParser,
  vitestParser,
  mochaParser,
  tapParser,
  goTestParser,
  goPackagesParser,
  cargoTestParser,
  ctestParser,
];

/** The runners whose summaries are read, for messages. */
export const countedRunners = parsers.map((parser) => parser.runner);

/**
 * The tests each runner in a test command's output says it ran; empty when no summary of a known
 * runner is in it. The output is hostile text (the code under test prints into it): a count read
 * from it can only be trusted to be what the output says, which is why a drop fails verification
 * but a count never makes it pass.
 */
export function countTests(output: string): RunnerCount[] {
  const lines = outputLines(output);
  return parsers.flatMap((parser) => {
    const ran = parser.count(lines);
    if (ran === undefined) return [];
    return [
      parser.unit
        ? { runner: parser.runner, ran, unit: parser.unit }
        : { runner: parser.runner, ran },
    ];
  });
}

/**
 * The runners the output shows ran but whose count could not be read (pytest's session header
 * without its summary line, jest's `Test Suites:` without `Tests:`): said in result.json and
 * summary.md, so a guard that is off is never off silently.
 */
export function unreadRunners(output: string): string[] {
  const lines = outputLines(output);
  return parsers
    .filter((parser) => parser.seen?.(lines) === true && parser.count(lines) === undefined)
    .map((parser) => parser.runner);
}

/** Lines as a terminal shows them: colours stripped, a line redrawn after `\r` read as its last form. */
function outputLines(output: string): string[] {
  return stripVTControlCharacters(output)
    .split("\n")
    .map((line) => line.replace(/\r$/, "").replace(/^.*\r/, ""));
}
