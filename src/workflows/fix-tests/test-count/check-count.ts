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
  /**
   * Runners the run before the agent shows ran but whose count could not be read: their tests
   * are not checked, whatever the status says of the others.
   */
  notRead?: string[] | undefined;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

function tests(count: number): string {
  return plural(count, "test");
}

/** "3 tests" or, for Go without -v, "3 packages" (of tests that ran). */
function counted(count: number, unit: RunnerCount["unit"]): string {
  return unit === "packages" ? plural(count, "package") : tests(count);
}

/** Why a package count is a weaker guard, once, where one was used. */
const packagesNote =
  "go test without -v names no passing test, so packages whose tests ran are counted (a test removed from a package that keeps others is not seen): run it with -v or -json to count tests";

/** The part of a message that says which runners were not checked, and why. */
function notReadNote(notRead: readonly string[]): string {
  return notRead.length === 0
    ? ""
    : `; not checked: ${notRead.join(", ")} (its output before the agent had no count cordon reads)`;
}

function total(counts: readonly RunnerCount[]): number {
  return counts.reduce((sum, count) => sum + count.ran, 0);
}

/**
 * The verification run's counts against those of the run before the agent. `notReadBefore`: the
 * runners whose output before the agent had no count cordon reads (count-tests.ts unreadRunners).
 */
export function checkTestCount(
  before: readonly RunnerCount[],
  after: readonly RunnerCount[],
  notReadBefore: readonly string[] = [],
): TestCountCheck {
  const notRead = notReadBefore.length === 0 ? {} : { notRead: [...notReadBefore] };
  if (before.length === 0) {
    const why =
      notReadBefore.length === 0
        ? `the run before the agent printed no test summary cordon reads (${[...new Set(countedRunners)].join(", ")})`
        : `${notReadBefore.join(", ")} ran before the agent but printed no count cordon reads`;
    return { status: "not_checked", message: `test count not checked: ${why}`, ...notRead };
  }
  const counts = { before: total(before), after: total(after) };
  const packages = before.some((count) => count.unit === "packages");
  const notes = `${packages ? `; ${packagesNote}` : ""}${notReadNote(notReadBefore)}`;
  if (after.length === 0) {
    return {
      status: "dropped",
      ...counts,
      message: `${counted(counts.before, before.length === 1 ? before[0]?.unit : undefined)} before, none counted after: verification printed no test summary${notes}`,
      ...notRead,
    };
  }
  // Per runner, so a command running two suites cannot lose one behind growth of the other.
  const drops = before.flatMap(({ runner, ran, unit }) => {
    const now = after.find((count) => count.runner === runner)?.ran ?? 0;
    return now < ran ? [{ runner, ran, now, unit }] : [];
  });
  const single = before.length === 1 ? before[0] : undefined;
  if (drops.length === 0) {
    const kept = single
      ? `${counted(single.ran, single.unit)} before, ${after.find((count) => count.runner === single.runner)?.ran ?? 0} after`
      : `${tests(counts.before)} before, ${counts.after} after`;
    return { status: "kept", ...counts, message: `${kept}${notes}`, ...notRead };
  }
  const named = drops.map(({ runner, ran, now, unit }) =>
    before.length === 1
      ? `${counted(ran, unit)} before, ${now} after`
      : `${runner}: ${counted(ran, unit)} before, ${now} after`,
  );
  return { status: "dropped", ...counts, message: `${named.join("; ")}${notes}`, ...notRead };
}
