import { randomUUID } from "node:crypto";

import {
  CordonError,
  ExitCode,
  describeAbort,
  exitCodeOfAbort,
  exitCodeOf,
  messageOf,
  systemErrorFix,
  type ExitCode as ExitCodeValue,
} from "../../common/index.js";
import {
  assertSafeChanges,
  parsePatch,
  takeChanges,
  type PatchedFile,
} from "../../changes/index.js";
import type { RunCost, RunResult, Runner, RunnerEvent } from "../../runner/index.js";
import { readSessionEntries, runSetupPhase, setupFailureMessage } from "../../runner/index.js";
import type { SetupPhase, SetupRun } from "../../runner/index.js";
import type { RunLimitsRequest } from "../../policy/index.js";
import type { ExecResult, SandboxLease } from "../../sandbox/index.js";
import { quoteShellArg } from "../../tools/index.js";
import { writeArtifacts } from "./artifacts.js";
import { binaryFilesChanged, binaryPaths, sortBinaryFiles } from "./binary-files.js";
import {
  classifyEnvironmentError,
  projectNamesOf,
  type EnvironmentError,
} from "./environment-errors.js";
import { protectedPaths, type ProtectionRules } from "./protected-files.js";
import { applyWithBaseHarness } from "./restore.js";
import { renderSummary } from "./summary.js";
import { learnTestOutputs, watchFilesWritten } from "./test-outputs.js";
import { verdict } from "./verdict.js";
import {
  checkTestCount,
  countTests,
  unreadRunners,
  type RunnerCount,
  type TestCountCheck,
} from "./test-count/index.js";

export type FixTestsStatus =
  | "already_passing"
  | "fixed"
  | "verification_failed"
  /** Verification failed exactly as the run before the agent: likely the environment (exit 9). */
  | "same_failure"
  | "protected_files_changed"
  | "binary_files_changed"
  | "agent_stopped"
  | "environment_error"
  | "no_changes"
  | "setup_failed"
  | "error";

export interface FixTestsOptions {
  /** A runner whose plans work on a seeded private copy (workspaceAccess none, seed on). */
  runner: Runner;
  testCommand: string;
  /** Where result.json, transcript.jsonl, changes.patch and summary.md go. */
  outDir: string;
  agentId?: string | undefined;
  modelId?: string | undefined;
  limits?: RunLimitsRequest | undefined;
  /** Limit of each test run. Default 10 minutes. */
  testTimeoutMs?: number | undefined;
  /**
   * Accept changes to tests, CI configuration and lockfiles. Default false. Never the test
   * harness: its changes are still put back to the base for verification (see restore.ts).
   */
  allowTestChanges?: boolean | undefined;
  /** Accept binary files in the patch (they cannot be reviewed as text). Default false. */
  allowBinary?: boolean | undefined;
  signal?: AbortSignal | undefined;
  onEvent?: ((event: RunnerEvent) => void) | undefined;
  /** Keep the two sandboxes (work and verify) for inspection instead of removing them. */
  keepSandboxes?: boolean | undefined;
  /** Phases, for progress on stderr. */
  onPhase?: ((message: string) => void) | undefined;
  /**
   * `--setup-cmd`: run after seeding, before the first test run, with its own allowlist; again
   * in the verify sandbox before the patch goes in. The agent phase gets the run's own egress.
   */
  setup?: SetupPhase | undefined;
}

export interface TestRun {
  exitCode: number | null;
  timedOut: boolean;
  /** The last part of stdout and stderr, interleaved. */
  outputTail: string;
  /**
   * Tests each runner said it ran, read from the whole output (not only the tail); empty when it
   * printed no summary cordon reads.
   */
  counts: RunnerCount[];
  /**
   * Runners the output shows ran but whose count could not be read (pytest's header without its
   * summary line): their tests are not counted, and result.json and summary.md say so.
   */
  countsNotRead: string[];
  durationMs: number;
}

/** The agent run's part of the result. */
export interface AgentOutcome extends Pick<
  RunResult,
  "status" | "exitCode" | "turns" | "usage" | "finalText" | "durationMs" | "model" | "cost"
> {
  message?: string | undefined;
}

export interface FixTestsResult {
  status: FixTestsStatus;
  exitCode: ExitCodeValue;
  message: string;
  /** Status `error`: what to do about it, when cordon knows (e.g. an unwritable CORDON_HOME). */
  fix?: string | undefined;
  testCommand: string;
  sessionKey: string;
  before?: TestRun | undefined;
  agent?: AgentOutcome | undefined;
  verification?: TestRun | undefined;
  filesChanged: PatchedFile[];
  /** Protected files the patch touches: tests, CI, lockfiles, the test harness. */
  protectedFiles: string[];
  /** Binary files in the patch (refused unless `allowBinary`). */
  binaryFiles: string[];
  /**
   * What the test command writes (build trees, caches, test binaries), learned on the work copy
   * before the agent (test-outputs.ts): files, and directories it created as `dir/` (all of
   * it). Left out of the patch, whatever the agent did to them.
   */
  testCommandOutputs: string[];
  /**
   * Whether the test command ran a second time before the agent, to see what a rebuild writes
   * (it wrote files outside the directories it created). Its cost is `durationsMs.outputs`.
   */
  testCommandRanTwice: boolean;
  /** Why the tests could not run at all (status `environment_error`): no agent was started. */
  environment?: EnvironmentError | undefined;
  /** The verification run's test count held against the run before the agent. */
  testCount?: TestCountCheck | undefined;
  /**
   * Files put back to the base in the verify sandbox before the tests ran (the harness; with
   * --allow-test-changes the patch's harness changes are kept in the patch but never verified).
   */
  restoredFiles: string[];
  /** The setup command's runs: in the work sandbox, then in the verify sandbox. */
  setupRuns?: SetupRun[] | undefined;
  /** Wall-clock time of the whole job, in milliseconds (`durationsMs` splits it by phase). */
  durationMs: number;
  /** Estimated cost of the job's model calls (the agent run's; $0 when no agent ran). */
  cost: RunCost;
  /**
   * Milliseconds by phase: `setup` seeds and runs the tests; `outputs` learns what the test
   * command writes beyond that run (test-outputs.ts); then `agent`, `verify`, and the `total`.
   */
  durationsMs: { setup: number; outputs: number; agent: number; verify: number; total: number };
  artifacts: string[];
}

const outputTailBytes = 12 * 1024;
const defaultTestTimeoutMs = 10 * 60 * 1000;

function tail(text: string, bytes: number): string {
  return text.length <= bytes ? text : `…(earlier output cut)…\n${text.slice(-bytes)}`;
}

async function runTests(
  lease: SandboxLease,
  command: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<TestRun> {
  // One stream, in the order the command wrote it, as a developer would see it in a terminal.
  const result: ExecResult = await lease.sandbox.exec(`{ ${command}\n} 2>&1`, {
    timeoutMs,
    signal,
  });
  return {
    exitCode: result.exitCode,
    timedOut: result.timedOut,
    outputTail: tail(result.stdout, outputTailBytes),
    // The runners' summaries are at the end, and exec keeps the head and the tail of a long output.
    counts: countTests(result.stdout),
    countsNotRead: unreadRunners(result.stdout),
    durationMs: result.durationMs,
  };
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

/**
 * Why the failed baseline run cannot be the code's fault, or undefined. The workspace's own file
 * names keep a missing module of the project itself (which the agent may fix) from counting.
 */
async function environmentErrorOf(
  work: Awaited<ReturnType<Runner["acquireSandbox"]>>,
  before: TestRun,
  signal: AbortSignal | undefined,
): Promise<EnvironmentError | undefined> {
  const files = await work.lease.sandbox.exec("git ls-files | cut -d/ -f1-2 | sort -u", { signal });
  const spec = work.plan.sandbox.spec;
  return classifyEnvironmentError({
    exitCode: before.exitCode,
    output: before.outputTail,
    network: spec && spec.docker.network === "none" && !spec.egress ? "none" : "some",
    projectNames: projectNamesOf(files.exitCode === 0 ? files.stdout : ""),
  });
}

function environmentFailure(
  environment: EnvironmentError,
): Pick<FixTestsResult, "status" | "exitCode" | "message" | "environment"> {
  return {
    status: "environment_error",
    exitCode: ExitCode.environment,
    environment,
    message: `The tests cannot run in the sandbox: ${environment.problem} ("${environment.evidence}"). That is the environment, not the code, so no agent was started. Fix: ${environment.fix}.`,
  };
}

/**
 * `cordon fix-tests`: run the tests on a seeded private copy; if they fail, let the agent fix the
 * code there; take its changes as a patch; verify the patch on a fresh clean copy; always write
 * the artifacts. The exit code is 0 when the tests pass (already, or after a verified fix), 8 when
 * verification fails (or the agent changed nothing), 9 when the tests cannot run in the sandbox
 * at all (no agent is started) or verification fails exactly as the run before the agent, else the agent run's own (5 turn limit, 6 timeout, 130 interrupted, …).
 */
export async function fixTests(options: FixTestsOptions): Promise<FixTestsResult> {
  const started = Date.now();
  const id = randomUUID().slice(0, 8);
  const sessionKey = `fix-tests-${id}`;
  const testTimeoutMs = options.testTimeoutMs ?? defaultTestTimeoutMs;
  const phase = (message: string): void => options.onPhase?.(message);
  const durations = { setup: 0, outputs: 0, agent: 0, verify: 0, total: 0 };
  const result: FixTestsResult = {
    status: "error",
    exitCode: ExitCode.internal,
    message: "",
    testCommand: options.testCommand,
    sessionKey,
    filesChanged: [],
    protectedFiles: [],
    restoredFiles: [],
    binaryFiles: [],
    testCommandOutputs: [],
    testCommandRanTwice: false,
    durationMs: 0,
    cost: { usd: 0 },
    durationsMs: durations,
    artifacts: [],
  };
  let patch: Uint8Array = new Uint8Array();
  /** The patch less its binary files, when it has some and they are not allowed. */
  let withoutBinaries: Uint8Array | undefined;
  /** The project the transcript is kept under; known once the sandbox is planned. */
  let project: string | undefined;
  // The work and verify copies carry `--carry` trees once between them (carry-layers.ts): the
  // verify copy layers the same pristine snapshot, never what the agent's copy holds.
  const request = {
    agentId: options.agentId,
    signal: options.signal,
    carryShare: `fix-tests-${id}`,
  };
  // Seeding and carrying say what they did (and how long carrying took) like a run does.
  const onProgress = (progress: { phase: string; message: string }): void =>
    options.onEvent?.({ type: "sandbox-progress", ...progress });
  /** `--setup-cmd` in a session's sandbox; true when it passed (or there is none). */
  const setUp = async (key: string): Promise<boolean> => {
    if (!options.setup) return true;
    phase(`running the setup command \`${options.setup.command}\``);
    const run = await runSetupPhase({
      runner: options.runner,
      setup: options.setup,
      agentId: options.agentId,
      sessionKey: key,
      carryShare: request.carryShare,
      timeoutMs: testTimeoutMs,
      signal: options.signal,
      onProgress: (message) => onProgress({ phase: "setup", message }),
      onEgress: ({ host, port, allowed }) =>
        options.onEvent?.({ type: "egress", host, port, allowed }),
    });
    (result.setupRuns ??= []).push(run);
    if (run.exitCode === 0) return true;
    Object.assign(result, {
      status: "setup_failed",
      // The environment, not the code: like environment_error.
      exitCode: ExitCode.environment,
      message: setupFailureMessage(run),
    });
    return false;
  };

  try {
    phase("seeding a private copy and running the tests");
    let mark = Date.now();
    if (!(await setUp(sessionKey))) return result;
    const work = await options.runner.acquireSandbox({
      ...request,
      sessionKey,
      onProgress,
      readsChanges: true,
    });
    result.sessionKey = work.plan.sessionKey;
    project = work.plan.agent.workspaceId;
    try {
      const watched = await watchFilesWritten(
        work.lease,
        () => runTests(work.lease, options.testCommand, testTimeoutMs, options.signal),
        options.signal,
      );
      result.before = watched.result;
      result.testCommandOutputs = watched.written;
      durations.setup = Date.now() - mark;
      if (result.before.exitCode === 0) {
        Object.assign(result, {
          status: "already_passing",
          exitCode: ExitCode.success,
          message: "The tests already pass; nothing to fix.",
        });
        return result;
      }

      const environment = await environmentErrorOf(work, result.before, options.signal);
      if (environment) {
        Object.assign(result, environmentFailure(environment));
        return result;
      }

      mark = Date.now();
      const learned = await learnTestOutputs({
        source: work.lease,
        first: watched,
        rerun: () => runTests(work.lease, options.testCommand, testTimeoutMs, options.signal),
        onRerun: () => phase("running the tests again to see what a rebuild writes"),
        signal: options.signal,
      });
      result.testCommandOutputs = learned.outputs;
      result.testCommandRanTwice = learned.ranTwice;
      durations.outputs = Date.now() - mark;

      phase(`tests fail (exit ${result.before.exitCode ?? "killed"}); running the agent`);
      mark = Date.now();
      const run = await options.runner.run({
        prompt: taskPrompt(options.testCommand, result.before, options.allowTestChanges ?? false),
        agentId: options.agentId,
        sessionKey,
        modelId: options.modelId,
        limits: options.limits,
        signal: options.signal,
        onEvent: options.onEvent,
      });
      durations.agent = Date.now() - mark;
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
      // Also after a limit or an interrupt: the partial changes are an artifact worth having.
      patch = await takeChanges(work.lease, {
        signal: options.signal,
        exclude: result.testCommandOutputs,
      });
      result.filesChanged = parsePatch(patch);
      if (run.status !== "completed") {
        Object.assign(result, {
          status: "agent_stopped",
          exitCode: run.exitCode,
          message: `The agent stopped before finishing: ${run.message ?? run.status}`,
        });
        return result;
      }
      result.binaryFiles = binaryPaths(result.filesChanged);
      if (result.binaryFiles.length > 0 && !options.allowBinary) {
        // Verified without its binary files (binary-files.ts); taken while the copy is at hand.
        withoutBinaries = await takeChanges(work.lease, {
          signal: options.signal,
          exclude: [...result.testCommandOutputs, ...result.binaryFiles],
        });
      }
    } finally {
      await work.lease.release();
    }

    if (patch.byteLength === 0) {
      // Nothing to verify: a fresh copy without changes fails as the first run did.
      Object.assign(result, {
        status: "no_changes",
        exitCode: ExitCode.verificationFailed,
        message:
          "The agent made no changes, so verification was skipped: the tests fail as they did before.",
      });
      return result;
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
    assertSafeChanges(work.plan.agent.workspace, verifiedFiles);
    result.protectedFiles = [...protectedPaths(verifiedFiles, rules).keys()];
    if (result.protectedFiles.length > 0 && !allowTestChanges) {
      Object.assign(result, protectedFilesChanged(result.protectedFiles));
      return result;
    }

    phase("verifying the patch on a fresh copy");
    mark = Date.now();
    if (!(await setUp(`${sessionKey}-verify`))) return result;
    const verify = await options.runner.acquireSandbox({
      ...request,
      sessionKey: `${sessionKey}-verify`,
      onProgress,
    });
    let verification: Verification;
    try {
      verification = await verifyPatch(
        verify.lease,
        withoutBinaries ?? patch,
        options.testCommand,
        testTimeoutMs,
        options.signal,
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
      return result;
    }
    // Only what the tests ran with: a patch refused before they ran restored nothing that counts.
    result.restoredFiles = verification.restoredFiles;
    result.verification = verification.run;
    result.testCount = checkTestCount(
      result.before?.counts ?? [],
      result.verification.counts,
      result.before?.countsNotRead ?? [],
    );
    if (withoutBinaries) {
      const { rebuilt, refused } = sortBinaryFiles(result.binaryFiles, verification.written);
      if (refused.length > 0) {
        result.binaryFiles = refused;
        Object.assign(result, binaryFilesChanged(refused));
        return result;
      }
      patch = withoutBinaries;
      result.filesChanged = verifiedFiles;
      result.binaryFiles = [];
      result.testCommandOutputs = [...result.testCommandOutputs, ...rebuilt].sort();
    }
    Object.assign(
      result,
      verdict({
        before: result.before,
        verification: result.verification,
        testCount: result.testCount,
        filesChanged: result.filesChanged,
        restoredFiles: result.restoredFiles,
      }),
    );
    if (result.status === "fixed") result.message += unverifiedNote(result.restoredFiles);
    return result;
  } catch (error) {
    if (options.signal?.aborted) {
      // Stopped, not failed: the abort's own error ("the command was aborted") says less.
      Object.assign(result, {
        status: "error",
        exitCode: exitCodeOfAbort(options.signal),
        message: describeAbort(options.signal),
      });
      return result;
    }
    Object.assign(result, {
      status: "error",
      exitCode: exitCodeOf(error),
      message: messageOf(error),
    });
    const fix = CordonError.is(error) ? error.fix : systemErrorFix(error);
    if (fix !== undefined) result.fix = fix;
    return result;
  } finally {
    durations.total = Date.now() - started;
    result.durationMs = durations.total;
    const transcript = await readSessionEntries({
      stateDir: options.runner.stateDir,
      sessionKey: result.sessionKey,
      project,
    }).catch(() => []);
    result.artifacts = await writeArtifacts(options.outDir, {
      result,
      transcriptLines: transcript.map((entry) => JSON.stringify(entry)),
      patch,
      summary: renderSummary(result),
    });
    if (!options.keepSandboxes) {
      // A CI job leaves nothing behind; the patch and transcript are in the artifacts.
      for (const key of [sessionKey, `${sessionKey}-verify`]) {
        await options.runner
          .discardSandbox({ agentId: options.agentId, sessionKey: key })
          .catch((error: unknown) =>
            phase(`could not remove the sandbox of ${key}: ${messageOf(error)}`),
          );
      }
    }
  }
}
