import { countedRunners, type RunnerCount } from "./count-tests.js";

/**
 * The test count of the verification run held against the run before the agent:
 * `kept` (no runner ran fewer tests), `dropped` (one did: verification fails), or `not_checked`
 * (the first run printed no summary cordon can read — said so, never a silent pass).
 */
export interface TestCountCheck {
  status: "kept" | "dropped" | "not_checked";
  /** Tests run before the agent (all runners), when counted. */
  before?: number | undefined;
  /** Tests run in verification (all runners), when counted. */
  after?: number | undefined;
  /** e.g. "12 tests before, 11 after", or why the count was not checked. */
  message: string;
}

function tests(count: number): string {
  return `${count} test${count === 1 ? "" : "s"}`;
}

function total(counts: readonly RunnerCount[]): number {
  return counts.reduce((sum, count) => sum + count.ran, 0);
}

export function checkTestCount(
  before: readonly RunnerCount[],
  after: readonly RunnerCount[],
): TestCountCheck {
  if (before.length === 0) {
    return {
      status: "not_checked",
      message: `test count not checked: the run before the agent printed no test summary cordon reads (${countedRunners.join(", ")})`,
    };
  }
  const counts = { before: total(before), after: total(after) };
  if (after.length === 0) {
    return {
      status: "dropped",
      ...counts,
      message: `${tests(counts.before)} before, none counted after: verification printed no test summary`,
    };
  }
  // Per runner, so a command running two suites cannot lose one behind growth of the other.
  const drops = before.flatMap(({ runner, ran }) => {
    const now = after.find((count) => count.runner === runner)?.ran ?? 0;
    return now < ran ? [{ runner, ran, now }] : [];
  });
  if (drops.length === 0) {
    return {
      status: "kept",
      ...counts,
      message: `${tests(counts.before)} before, ${counts.after} after`,
    };
  }
  const named = drops.map(({ runner, ran, now }) =>
    before.length === 1
      ? `${tests(ran)} before, ${now} after`
      : `${runner}: ${tests(ran)} before, ${now} after`,
  );
  return { status: "dropped", ...counts, message: named.join("; ") };
}
