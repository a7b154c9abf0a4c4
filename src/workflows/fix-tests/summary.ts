import { formatCost } from "../../runner/index.js";
import type { AttemptReport } from "./attempts.js";
import type { FixTestsResult, TestRun } from "./fix-tests.js";

const headline: Record<FixTestsResult["status"], string> = {
  already_passing: "✅ Tests already pass",
  fixed: "✅ Fixed and verified",
  verification_failed: "❌ Verification failed",
  same_failure: "⚠️ The same failure as before the agent: likely the environment, not the code",
  protected_files_changed:
    "❌ Rejected: the agent changed tests, the test harness, CI or lockfiles",
  binary_files_changed: "❌ Rejected: the patch changes binary files",
  agent_stopped: "⚠️ The agent stopped before finishing",
  environment_error: "⚠️ The tests cannot run in the sandbox (environment, not code)",
  no_changes: "❌ The agent made no changes",
  setup_failed: "❌ The setup command failed",
  error: "❌ Error",
};

/** Longest list of paths shown inline; the rest are counted (result.json has them all). */
const listedPaths = 8;

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}

function fenced(text: string): string {
  const fence = text.includes("```") ? "~~~~" : "```";
  return `${fence}\n${text.trimEnd()}\n${fence}`;
}

function paths(files: readonly string[]): string {
  const shown = files.slice(0, listedPaths).map((file) => `\`${file}\``);
  const more = files.length - shown.length;
  return more > 0 ? `${shown.join(", ")} and ${more} more` : shown.join(", ");
}

function testsRan(run: TestRun): string {
  const tests = run.counts.filter((count) => count.unit !== "packages");
  const parts: string[] = [];
  if (tests.length > 0) {
    const total = tests.reduce((sum, count) => sum + count.ran, 0);
    parts.push(`${total} test(s) ran (${tests.map((count) => count.runner).join(", ")})`);
  }
  for (const { runner, ran, unit } of run.counts) {
    if (unit === "packages") parts.push(`${ran} package(s) ran their tests (${runner})`);
  }
  // Said plainly: a runner whose count was not read is a guard that is off.
  for (const runner of run.countsNotRead) parts.push(`⚠️ no count read from ${runner}`);
  return parts.length === 0 ? "no test summary read" : parts.join("; ");
}

function exited(run: TestRun): string {
  if (run.timedOut) return "timed out";
  return run.exitCode === null ? "was killed" : `exited ${run.exitCode}`;
}

/** One row per attempt: how it ended, what it used, and which won. */
function attemptsTable(attempts: readonly AttemptReport[]): string[] {
  const lines = [
    "| attempt | outcome | turns | tokens (in / out) | cost | files |",
    "| --- | --- | --- | --- | --- | --- |",
  ];
  for (const attempt of attempts) {
    const outcome = attempt.won
      ? "🏆 won: fixed and verified"
      : attempt.status.replaceAll("_", " ");
    lines.push(
      `| ${attempt.attempt} | ${outcome} | ${attempt.turns} | ${attempt.usage.inputTokens} / ${attempt.usage.outputTokens} | ${formatCost(attempt.cost)} | ${attempt.filesChanged.length} |`,
    );
  }
  return lines;
}

/** The steps that led to the verdict, in order, each with what it found. */
function why(result: FixTestsResult): string[] {
  const lines: string[] = [];
  if (result.before) {
    lines.push(
      `- before the agent: the tests ${exited(result.before)}; ${testsRan(result.before)}`,
    );
  }
  if (result.agent) {
    const { status, turns, usage, cost, model } = result.agent;
    const costNote = cost ? `, ${formatCost(cost)}` : "";
    lines.push(
      `- the agent: ${status}, ${turns} turn(s), ${usage.inputTokens} input / ${usage.outputTokens} output tokens${costNote}${model ? ` (${model})` : ""}`,
    );
  }
  if (result.agent && result.status !== "agent_stopped" && result.status !== "error") {
    const protectedNote =
      result.protectedFiles.length === 0
        ? "no test, harness, CI or lockfile changed"
        : `⛔ changed protected files ${paths(result.protectedFiles)}`;
    const binaryNote =
      result.binaryFiles.length === 0
        ? "no binary file"
        : `binary files ${paths(result.binaryFiles)}`;
    lines.push(
      `- the patch: ${result.filesChanged.length} file(s); ${protectedNote}; ${binaryNote}`,
    );
  }
  if (result.restoredFiles.length > 0) {
    lines.push(
      `- Restored from the base before verification (the test harness): ${paths(result.restoredFiles)}`,
    );
  }
  if (result.verification) {
    lines.push(
      `- verification on a clean copy with the patch: the tests ${exited(result.verification)}; ${testsRan(result.verification)}`,
    );
  }
  if (result.testCount) {
    const mark = { kept: "", dropped: "❌ ", not_checked: "⚠️ " }[result.testCount.status];
    lines.push(`- test count: ${mark}${result.testCount.message}`);
  }
  return lines;
}

/**
 * summary.md: one screen for a CI step summary or a PR comment — the verdict and why, what changed
 * and what was left out, then the agent's own words; the test output folded away at the end.
 */
export function renderSummary(result: FixTestsResult): string {
  const lines = [`## cordon fix-tests: ${headline[result.status]}`, "", result.message, ""];
  if (result.attempts) {
    const which =
      result.winner === undefined
        ? "None won; the steps below are those of the attempt that got furthest."
        : `Attempt ${result.winner} won; the steps below, the patch and the transcript are its own (each attempt's are in \`attempt-N.patch\` and \`attempt-N.transcript.jsonl\`).`;
    lines.push(`### Attempts`, "", ...attemptsTable(result.attempts), "", which, "");
  }
  lines.push(`### Why`, "", `- test command: \`${result.testCommand}\``, ...why(result));

  if (result.filesChanged.length > 0 || result.testCommandOutputs.length > 0) {
    lines.push("", "### What changed", "");
    for (const file of result.filesChanged) {
      const marks = [
        result.protectedFiles.includes(file.path) ? " ⛔ protected" : "",
        file.binary ? " (binary)" : "",
      ].join("");
      lines.push(`- \`${file.path}\` (${file.change})${marks}`);
    }
    if (result.testCommandOutputs.length > 0) {
      const twice = result.testCommandRanTwice
        ? " (it ran twice before the agent, to see what a rebuild writes too)"
        : "";
      lines.push(
        "",
        `Left out of the patch, written by the test command itself${twice}: ${paths(result.testCommandOutputs)}.`,
      );
    }
  }
  if (result.agent?.finalText) {
    lines.push("", "### The agent's summary", "", result.agent.finalText);
  }
  const tests = result.verification ?? result.before;
  if (tests) {
    const which = result.verification ? "Verification run" : "Test run";
    lines.push(
      "",
      "<details>",
      `<summary>${which} output (${exited(tests)})</summary>`,
      "",
      fenced(tests.outputTail),
      "",
      "</details>",
    );
  }
  const d = result.durationsMs;
  lines.push(
    "",
    `Exit code ${result.exitCode}; ${seconds(d.total)} (setup ${seconds(d.setup)}, test outputs ${seconds(d.outputs)}, agent ${seconds(d.agent)}, verify ${seconds(d.verify)}). Artifacts: \`result.json\`, \`changes.patch\`, \`transcript.jsonl\`.`,
    "",
  );
  return lines.join("\n");
}
