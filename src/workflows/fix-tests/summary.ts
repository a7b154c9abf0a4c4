import type { FixTestsResult } from "./fix-tests.js";

const headline: Record<FixTestsResult["status"], string> = {
  already_passing: "✅ Tests already pass",
  fixed: "✅ Fixed and verified",
  verification_failed: "❌ Verification failed",
  protected_files_changed:
    "❌ Rejected: the agent changed tests, the test harness, CI or lockfiles",
  agent_stopped: "⚠️ The agent stopped before finishing",
  error: "❌ Error",
};

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}

function fenced(text: string): string {
  const fence = text.includes("```") ? "~~~~" : "```";
  return `${fence}\n${text.trimEnd()}\n${fence}`;
}

/** summary.md: what a reviewer needs first, for a CI step summary or a PR comment. */
export function renderSummary(result: FixTestsResult): string {
  const lines = [
    `## cordon fix-tests: ${headline[result.status]}`,
    "",
    result.message,
    "",
    `- test command: \`${result.testCommand}\``,
    `- exit code: ${result.exitCode}`,
  ];
  if (result.agent) {
    const usage = result.agent.usage;
    lines.push(
      `- agent: ${result.agent.status}, ${result.agent.turns} turn(s), ${usage.inputTokens} input / ${usage.outputTokens} output tokens`,
    );
  }
  if (result.testCount) lines.push(`- tests run: ${result.testCount.message}`);
  const d = result.durationsMs;
  lines.push(
    `- time: ${seconds(d.total)} (setup ${seconds(d.setup)}, agent ${seconds(d.agent)}, verify ${seconds(d.verify)})`,
  );
  if (result.filesChanged.length > 0) {
    lines.push("", "### Files changed", "");
    for (const file of result.filesChanged) {
      const mark = result.protectedFiles.includes(file.path) ? " ⛔ protected" : "";
      lines.push(`- \`${file.path}\` (${file.change})${mark}`);
    }
  }
  if (result.restoredFiles.length > 0) {
    lines.push("", "### Restored from the base before the tests ran", "");
    for (const file of result.restoredFiles) lines.push(`- \`${file}\``);
  }
  if (result.agent?.finalText)
    lines.push("", "### The agent's summary", "", result.agent.finalText);
  const tests = result.verification ?? result.before;
  if (tests) {
    const which = result.verification ? "Verification run" : "Test run";
    lines.push(
      "",
      `### ${which} (exit ${tests.exitCode ?? "killed"})`,
      "",
      fenced(tests.outputTail),
    );
  }
  lines.push("", "Artifacts: `result.json`, `changes.patch`, `transcript.jsonl`.", "");
  return lines.join("\n");
}
