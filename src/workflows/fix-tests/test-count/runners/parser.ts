/**
 * One test runner's summary reader. `count` gets the whole output of a test command as lines
 * (colours stripped, `\r` removed) and returns how many tests ran — passed, failed or errored,
 * never skipped, ignored or todo — or undefined when the output holds no summary of this runner.
 * A command that runs the runner several times (`make test` over two packages) prints several
 * summaries; they are added up.
 */
export interface TestCountParser {
  /** Shown in result.json and summary.md, e.g. "pytest". */
  runner: string;
  /** What `count` counts when it is not tests: Go's package lines without -v. */
  unit?: "packages";
  count(lines: readonly string[]): number | undefined;
  /**
   * Whether the output shows this runner ran, summary or not (pytest's session header, jest's
   * `Test Suites:`): a runner seen whose count is undefined is reported as not read, never
   * skipped silently. Absent for runners whose summary is the only sign of them.
   */
  seen?(lines: readonly string[]): boolean;
}

/** The sum of `values`, or undefined when there are none (no summary seen). */
export function sumOf(values: readonly number[]): number | undefined {
  return values.length === 0 ? undefined : values.reduce((total, value) => total + value, 0);
}

/** The number after `label` in a list such as `2 passed, 1 failed` (0 when absent). */
export function countOf(text: string, label: RegExp): number {
  const match = new RegExp(`(\\d+) (?:${label.source})\\b`).exec(text);
  return match ? Number(match[1]) : 0;
}
