import { stripVTControlCharacters } from "node:util";

import { ExitCode } from "../../common/index.js";
import type { PatchedFile } from "../../changes/index.js";
import type { FixTestsResult, TestRun } from "./fix-tests.js";
import type { TestCountCheck } from "./test-count/index.js";
import { imageThatHas } from "./system-tools.js";

/** The marker `outputTail` starts with when the output was cut (fix-tests.ts). */
const cutMarker = "…(earlier output cut)…";

/**
 * What stays the same between two runs of one failure on two copies: the output without what
 * differs from run to run anyway — durations and clock times, temporary directories (go test's
 * `/tmp/go-build2730712386`), long numbers and hex ids (pids, ports, hashes, addresses). Line
 * numbers and values stay: a patch that moves a failing line or changes a wrong value changes the
 * failure.
 */
export function failureSignature(run: Pick<TestRun, "exitCode" | "outputTail">): string {
  let lines = stripVTControlCharacters(run.outputTail).split("\n");
  // A cut tail starts mid-line, at an offset that moves with every duration printed before it.
  if (lines[0]?.startsWith(cutMarker)) lines = lines.slice(2);
  const masked = lines.map((line) =>
    line
      .replace(/^.*\r(?!$)/, "")
      .replace(/\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?/g, "<time>")
      .replace(/\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b/g, "<time>")
      .replace(/\b\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|sec|seconds?|m|min)\b/g, "<duration>")
      .replace(/(\/(?:tmp|var\/tmp)\/)[^\s/'"`:]+/g, "$1<tmp>")
      .replace(/\b0x[0-9a-f]+\b|\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b/gi, "<hex>")
      .replace(/\d{5,}/g, "<n>")
      .trimEnd(),
  );
  return [`exit ${run.exitCode ?? "killed"}`, ...masked.filter((line) => line !== "")].join("\n");
}

/** No runner said it ran a test (none printed a count cordon reads, or each counted none). */
function ranNoTests(run: TestRun): boolean {
  return run.counts.every((count) => count.ran === 0);
}

/**
 * Whether verification failed as the run before the agent did, before any test ran, with the
 * whole patch in place: then the patch cannot be what fails. A test that fails the same way is
 * not enough — an agent that hid it in its own copy (a harness change put back for verification,
 * restore.ts) or did not reach the bug leaves that very failure too, and that is the patch's.
 */
export function failedAsBeforeTheAgent(input: VerdictInput): boolean {
  const { before, verification, restoredFiles } = input;
  return (
    verification.exitCode !== 0 &&
    restoredFiles.length === 0 &&
    ranNoTests(before) &&
    ranNoTests(verification) &&
    failureSignature(before) === failureSignature(verification)
  );
}

const sameFailureFix = `run the tests in the sandbox a run gets (\`cordon exec -- <test command>\`) and compare with the run before the agent (result.json \`before\`); if they need something the sandbox lacks, carry it in (\`--carry\`), install it first (\`--setup-cmd\` with \`--setup-allow-host\`), or ${imageThatHas("it")}; if the code is at fault after all, the agent's patch did not reach the failure (changes.patch, transcript.jsonl)`;

export interface VerdictInput {
  /** The failing run before the agent. */
  before: TestRun;
  /** The tests on a clean copy with the patch. */
  verification: TestRun;
  testCount: TestCountCheck;
  filesChanged: readonly PatchedFile[];
  /** Files of the patch put back to the base before verification (the harness, restore.ts). */
  restoredFiles: readonly string[];
}

export type Verdict = Pick<FixTestsResult, "status" | "exitCode" | "message">;

/**
 * The verdict on a verified patch, in one place: it is fixed when the tests pass and ran no fewer
 * tests than before the agent; a failure that is the very failure of the run before the agent,
 * before any test ran (failedAsBeforeTheAgent), is likely the environment's (exit 9 with the
 * fix); any other failure is the patch's (exit 8).
 */
export function verdict(input: VerdictInput): Verdict {
  const { verification, testCount, filesChanged } = input;
  const failed = { status: "verification_failed", exitCode: ExitCode.verificationFailed } as const;
  if (verification.exitCode !== 0) {
    if (failedAsBeforeTheAgent(input)) {
      return {
        status: "same_failure",
        exitCode: ExitCode.environment,
        message: `The same failure as before the agent: likely the environment, not the code. With the patch, the tests fail on a clean copy exactly as they did before the agent ran (the same exit code and output, timings and temporary names aside) and no test ran either time, so what fails comes before the code under test. Fix: ${sameFailureFix}.`,
      };
    }
    return { ...failed, message: "The tests still fail on a clean copy with the patch." };
  }
  if (testCount.status === "dropped") {
    return {
      ...failed,
      message: `The tests pass on a clean copy with the patch, but fewer ran: ${testCount.message}. Tests must not be removed or skipped to make the command pass.`,
    };
  }
  // The whole reason when the count was not checked: a guard that is off is never off silently.
  const counted =
    testCount.status === "not_checked" ? `⚠️ ${testCount.message}` : testCount.message;
  return {
    status: "fixed",
    exitCode: ExitCode.success,
    message: `Fixed: the tests pass on a clean copy with the patch (${filesChanged.length} file(s) changed; ${counted}).`,
  };
}
