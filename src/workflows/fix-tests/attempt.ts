import { randomUUID } from "node:crypto";

import { ExitCode } from "../../common/index.js";
import {
  assertSafeChanges,
  parsePatch,
  takeChanges,
  type PatchedFile,
} from "../../changes/index.js";
import type { ModelClient, Runner, RunnerEvent } from "../../runner/index.js";
import type { SandboxLease } from "../../sandbox/index.js";
import { quoteShellArg } from "../../tools/index.js";
import { binaryFilesChanged, binaryPaths, sortBinaryFiles } from "./binary-files.js";
import type { FixTestsOptions, FixTestsResult, TestRun } from "./fix-tests.js";
import { protectedPaths, type ProtectionRules } from "./protected-files.js";
import { applyWithBaseHarness } from "./restore.js";
import { runTests } from "./run-tests.js";
import { watchFilesWritten } from "./test-outputs.js";
import { checkTestCount } from "./test-count/index.js";
import { verdict } from "./verdict.js";

/** What every attempt of one job shares: its settings and how it prepares a sandbox. */
export interface AttemptContext {
  options: FixTestsOptions;
  testTimeoutMs: number;
  /** Carried trees are shared by every sandbox of the job (carry-layers.ts). */
  carryShare: string;
  /** The agent workspace on the host: a patch `apply` would refuse is refused here too. */
  workspace: string;
  /** `--setup-cmd` in a session's sandbox, recorded in `result`; true when it passed or there is none. */
  setUp: (
    sessionKey: string,
    result: FixTestsResult,
    signal: AbortSignal | undefined,
  ) => Promise<boolean>;
}

/** One attempt: which session it works in, what it reports to, and what stops it. */
export interface AttemptRequest {
  sessionKey: string;
  /**
   * What it fills as it goes, so a throw leaves what was found (the patch is an artifact then
   * too): the job's own result with one attempt, a copy of it after the run before the agent
   * with several.
   */
  end: AttemptEnd;
  signal: AbortSignal | undefined;
  /** This attempt's model client, over the runner's. */
  model?: ModelClient | undefined;
  onEvent?: ((event: RunnerEvent) => void) | undefined;
  onProgress: (progress: { phase: string; message: string }) => void;
  phase: (message: string) => void;
  /**
   * The work sandbox when the caller holds it (one attempt works in the copy the tests ran in);
   * else the attempt acquires its session's after the agent run. Released here either way.
   */
  work?: SandboxLease | undefined;
}

/** How an attempt ended: its result, and its patch (empty when none was taken). */
export interface AttemptEnd {
  result: FixTestsResult;
  patch: Uint8Array;
}

function taskPrompt(command: string, before: TestRun, allowTestChanges: boolean): string {
  const harness =
    "the test harness (Makefile, package.json scripts, test runner configuration, conftest.py)";
  const rules = allowTestChanges
    ? `Prefer fixing the code under test; change a test only when the test itself is wrong. Leave ${harness} alone: it is put back to the original before your patch is verified.`
    : `Fix the code under test. Do not change tests, ${harness}, CI configuration or lockfiles: a change to any of them is rejected.`;
  return [
    `The test command \`${command}\` fails in this workspace. Make it pass.`,
    rules,
    `Run \`${command}\` to check your work before you finish, then say in two or three sentences what was wrong and what you changed.`,
    "",
    `Output of the failing run (exit code ${before.exitCode ?? "none: killed"}${before.timedOut ? ", timed out" : ""}):`,
    "```",
    before.outputTail.trimEnd(),
    "```",
  ].join("\n");
}

/** What verification found: the test run (none when the harness check refused the patch first). */
interface Verification {
  run?: TestRun | undefined;
  /** Files whose harness part (package.json scripts, pytest sections) the patch changed. */
  harnessChanges: Map<string, string[]>;
  restoredFiles: string[];
  /** Files the test run wrote in the verify copy. */
  written: string[];
}

/**
 * Applies the patch in a fresh sandbox (a new seeded copy), puts the base harness back
 * (restore.ts), and runs the tests there. A patch that changes the harness part of package.json,
 * setup.cfg or pyproject.toml is refused before the tests run unless test changes are allowed.
 */
async function verifyPatch(
  lease: SandboxLease,
  patch: Uint8Array,
  command: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  harness: { files: readonly PatchedFile[]; rules: ProtectionRules; allowTestChanges: boolean },
): Promise<Verification> {
  const verification: Verification = { harnessChanges: new Map(), restoredFiles: [], written: [] };
  if (patch.byteLength > 0) {
    const patchFile = `/tmp/.cordon-verify-${randomUUID()}.patch`;
    await lease.sandbox.files.writeFile(patchFile, patch, { signal });
    const base = await applyWithBaseHarness(
      lease.sandbox,
      patchFile,
      () =>
        lease.sandbox.exec(
          `git apply --binary --whitespace=nowarn ${quoteShellArg(patchFile)} 2>&1`,
          { signal },
        ),
      { ...harness, signal },
    );
    const applied = base.applied;
    if (applied.exitCode !== 0) {
      verification.run = {
        exitCode: applied.exitCode,
        timedOut: false,
        outputTail: `the patch did not apply to a clean copy:\n${applied.stdout}`,
        counts: [],
        countsNotRead: [],
        durationMs: applied.durationMs,
      };
      return verification;
    }
    Object.assign(verification, {
      harnessChanges: base.harnessChanges,
      restoredFiles: base.restored,
    });
    if (base.harnessChanges.size > 0 && !harness.allowTestChanges) return verification;
  }
  const watched = await watchFilesWritten(
    lease,
    () => runTests(lease, command, timeoutMs, signal),
    signal,
  );
  verification.run = watched.result;
  verification.written = watched.written;
  return verification;
}

/** With --allow-test-changes the patch may still carry harness changes that were put back. */
function unverifiedNote(restored: readonly string[]): string {
  return restored.length === 0
    ? ""
    : ` Its changes to ${restored.join(", ")} were not verified: the tests ran with the base version (review them).`;
}

function protectedFilesChanged(
  files: readonly string[],
): Pick<FixTestsResult, "status" | "exitCode" | "message"> {
  return {
    status: "protected_files_changed",
    exitCode: ExitCode.verificationFailed,
    message: `The agent changed tests, the test harness, CI configuration or lockfiles: ${files.join(", ")}. The code must be fixed, not the checks.`,
  };
}

async function acquireWork(
  runner: Runner,
  context: AttemptContext,
  attempt: AttemptRequest,
): Promise<SandboxLease> {
  const work = await runner.acquireSandbox({
    agentId: context.options.agentId,
    signal: attempt.signal,
    carryShare: context.carryShare,
    sessionKey: attempt.sessionKey,
    onProgress: attempt.onProgress,
    readsChanges: true,
  });
  return work.lease;
}

/**
 * One attempt at the fix, after the run before the agent showed the failure: the agent works in
 * the attempt's copy; its changes are taken as a patch; the patch is checked (protected and binary
 * files) and verified on a fresh clean copy; the verdict is the attempt's status. Throws only what
 * the job reports as an error (a sandbox that could not start, an unsafe path, an abort).
 */
export async function runAttempt(context: AttemptContext, attempt: AttemptRequest): Promise<void> {
  const { options, testTimeoutMs } = context;
  const { end, signal, phase, sessionKey } = attempt;
  const { result } = end;
  const durations = result.durationsMs;
  const before = result.before;
  if (!before) throw new Error("an attempt needs the run before the agent");
  /** The patch less its binary files, when it has some and they are not allowed. */
  let withoutBinaries: Uint8Array | undefined;
  let work = attempt.work;
  try {
    const mark = Date.now();
    const run = await options.runner.run({
      prompt: taskPrompt(options.testCommand, before, options.allowTestChanges ?? false),
      agentId: options.agentId,
      sessionKey,
      modelId: options.modelId,
      model: attempt.model,
      limits: options.limits,
      signal,
      onEvent: attempt.onEvent,
    });
    durations.agent = Date.now() - mark;
    // An attempt's own session, as the plan names it (its transcript is read by this key).
    if (!work) result.sessionKey = run.sessionKey;
    result.agent = {
      status: run.status,
      exitCode: run.exitCode,
      turns: run.turns,
      usage: run.usage,
      durationMs: run.durationMs,
      cost: run.cost,
      message: run.message,
      finalText: run.finalText,
    };
    if (run.model !== undefined) result.agent.model = run.model;
    result.cost = run.cost;
    work ??= await acquireWork(options.runner, context, attempt);
    // Also after a limit or an interrupt: the partial changes are an artifact worth having.
    end.patch = await takeChanges(work, { signal, exclude: result.testCommandOutputs });
    result.filesChanged = parsePatch(end.patch);
    if (run.status !== "completed") {
      Object.assign(result, {
        status: "agent_stopped",
        exitCode: run.exitCode,
        message: `The agent stopped before finishing: ${run.message ?? run.status}`,
      });
      return;
    }
    result.binaryFiles = binaryPaths(result.filesChanged);
    if (result.binaryFiles.length > 0 && !options.allowBinary) {
      // Verified without its binary files (binary-files.ts); taken while the copy is at hand.
      withoutBinaries = await takeChanges(work, {
        signal,
        exclude: [...result.testCommandOutputs, ...result.binaryFiles],
      });
    }
  } finally {
    await work?.release();
  }

  if (end.patch.byteLength === 0) {
    // Nothing to verify: a fresh copy without changes fails as the first run did.
    Object.assign(result, {
      status: "no_changes",
      exitCode: ExitCode.verificationFailed,
      message:
        "The agent made no changes, so verification was skipped: the tests fail as they did before.",
    });
    return;
  }

  const rules: ProtectionRules = {
    testCommand: options.testCommand,
    protect: (await options.runner.config()).fixTests.protect,
  };
  const allowTestChanges = options.allowTestChanges ?? false;
  // Binary files are judged by what the test command does with them (binary-files.ts).
  const verifiedFiles = withoutBinaries ? parsePatch(withoutBinaries) : result.filesChanged;
  // A fix is for `cordon apply` or `git apply` to the real workspace: one `apply` would refuse
  // (a link out of it, a path into .git) is refused here, exit 7, before it is certified.
  assertSafeChanges(context.workspace, verifiedFiles);
  result.protectedFiles = [...protectedPaths(verifiedFiles, rules).keys()];
  if (result.protectedFiles.length > 0 && !allowTestChanges) {
    Object.assign(result, protectedFilesChanged(result.protectedFiles));
    return;
  }

  phase("verifying the patch on a fresh copy");
  const mark = Date.now();
  const verifyKey = `${sessionKey}-verify`;
  if (!(await context.setUp(verifyKey, result, signal))) return;
  const verify = await options.runner.acquireSandbox({
    agentId: options.agentId,
    signal,
    carryShare: context.carryShare,
    sessionKey: verifyKey,
    onProgress: attempt.onProgress,
  });
  let verification: Verification;
  try {
    verification = await verifyPatch(
      verify.lease,
      withoutBinaries ?? end.patch,
      options.testCommand,
      testTimeoutMs,
      signal,
      { files: verifiedFiles, rules, allowTestChanges },
    );
  } finally {
    await verify.lease.release();
  }
  durations.verify = Date.now() - mark;
  for (const file of verification.harnessChanges.keys()) {
    if (!result.protectedFiles.includes(file)) result.protectedFiles.push(file);
  }
  if (verification.run === undefined) {
    const named = [...verification.harnessChanges].map(
      ([file, parts]) => `${file} (${parts.join(", ")})`,
    );
    Object.assign(result, protectedFilesChanged(named));
    return;
  }
  // Only what the tests ran with: a patch refused before they ran restored nothing that counts.
  result.restoredFiles = verification.restoredFiles;
  result.verification = verification.run;
  result.testCount = checkTestCount(
    before.counts,
    result.verification.counts,
    before.countsNotRead,
  );
  if (withoutBinaries) {
    const { rebuilt, refused } = sortBinaryFiles(result.binaryFiles, verification.written);
    if (refused.length > 0) {
      result.binaryFiles = refused;
      Object.assign(result, binaryFilesChanged(refused));
      return;
    }
    end.patch = withoutBinaries;
    result.filesChanged = verifiedFiles;
    result.binaryFiles = [];
    result.testCommandOutputs = [...result.testCommandOutputs, ...rebuilt].sort();
  }
  Object.assign(
    result,
    verdict({
      before,
      verification: result.verification,
      testCount: result.testCount,
      filesChanged: result.filesChanged,
      restoredFiles: result.restoredFiles,
    }),
  );
  if (result.status === "fixed") result.message += unverifiedNote(result.restoredFiles);
  return;
}
