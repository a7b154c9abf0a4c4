import { stripVTControlCharacters } from "node:util";

import { cargoTestParser } from "./runners/cargo-test.js";
import { goTestParser } from "./runners/go-test.js";
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
}

const parsers: readonly TestCountParser[] = [
  unittestParser,
  pytestParser,
  jestParser,
  vitestParser,
  mochaParser,
  tapParser,
  goTestParser,
  cargoTestParser,
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
  const lines = stripVTControlCharacters(output)
    .split("\n")
    .map((line) => line.replace(/\r$/, "").replace(/^.*\r/, ""));
  return parsers.flatMap((parser) => {
    const ran = parser.count(lines);
    return ran === undefined ? [] : [{ runner: parser.runner, ran }];
  });
}
