import { randomUUID } from "node:crypto";

import {
  ConfigError,
  CordonError,
  ExitCode,
  describeAbort,
  exitCodeOfAbort,
  exitCodeOf,
  messageOf,
  systemErrorFix,
  type ExitCode as ExitCodeValue,
} from "../../common/index.js";
import type { PatchedFile } from "../../changes/index.js";
import type { ModelClient, RunCost, RunResult, Runner, RunnerEvent } from "../../runner/index.js";
import { readSessionEntries, runSetupPhase, setupFailureMessage } from "../../runner/index.js";
import type { SetupPhase, SetupRun } from "../../runner/index.js";
import type { RunLimitsRequest } from "../../policy/index.js";
import { linesOf, writeArtifacts } from "./artifacts.js";
import { runAttempt, type AttemptContext, type AttemptEnd } from "./attempt.js";
import {
  attemptArtifactNames,
  attemptSessionKey,
  maxAttempts,
  mergeAttempts,
  runAttempts,
  forkedAttemptCopies,
  type AttemptCopies,
  type AttemptEvent,
  type AttemptReport,
} from "./attempts.js";
import {
  classifyEnvironmentError,
  projectNamesOf,
  type EnvironmentError,
} from "./environment-errors.js";
import { runTests } from "./run-tests.js";
import { renderSummary } from "./summary.js";
import { learnTestOutputs, watchFilesWritten } from "./test-outputs.js";
import type { RunnerCount, TestCountCheck } from "./test-count/index.js";

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
  /**
   * The agent run's events; with several attempts, each attempt's nested in an `attempt` event,
   * and an `attempt-end` as each ends.
   */
  onEvent?: ((event: FixTestsEvent) => void) | undefined;
  /**
   * Independent agents at the fix, at once, each in its own copy and verified on its own clean
   * copy; the first verified fix wins and the others are stopped (`--attempts`). Default 1, at
   * most 8. Their agent runs take the runner's lanes (`maxConcurrentRuns`).
   */
  attempts?: number | undefined;
  /**
   * The model client of each attempt, by index, over the runner's: a scripted model plays its
   * script once, so each scripted attempt needs its own (one script each, or copies of one).
   */
  attemptModels?: readonly ModelClient[] | undefined;
  /**
   * How the attempts' copies are made (attempts.ts): default forks of the copy the tests ran in;
   * `seededAttemptCopies` seeds each afresh (for a sandbox backend that cannot fork).
   */
  attemptCopies?: AttemptCopies | undefined;
  /** Keep the sandboxes (work and verify; every attempt's) for inspection instead of removing them. */
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
  /**
   * With several attempts: each one's outcome, turns, tokens and cost. The fields above are the
   * winner's (or, with none, those of the failure that got furthest), but `cost` is all of theirs.
   */
  attempts?: AttemptReport[] | undefined;
  /** The attempt whose fix won (1-based), when one did. */
  winner?: number | undefined;
}

/** What `fixTests` reports as it goes: the agent run's events, and the attempts'. */
export type FixTestsEvent = RunnerEvent | AttemptEvent;

const defaultTestTimeoutMs = 10 * 60 * 1000;

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

/** `attempts` as asked, or a usage error naming the range. */
function attemptCount(attempts: number | undefined): number {
  const count = attempts ?? 1;
  if (!Number.isInteger(count) || count < 1 || count > maxAttempts) {
    throw new ConfigError(
      `--attempts must be a whole number from 1 to ${maxAttempts}, not ${count}.`,
      {
        fix: `pass --attempts between 1 and ${maxAttempts}: each attempt is an agent run and its own sandboxes at once`,
      },
    );
  }
  return count;
}

/**
 * `cordon fix-tests`: run the tests on a seeded private copy; if they fail, let the agent fix the
 * code there (or N agents, each in its own copy, the first verified fix winning: attempts.ts);
 * take its changes as a patch; verify the patch on a fresh clean copy; always write
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
  const end: AttemptEnd = { result, patch: new Uint8Array() };
  /** Sessions of this job whose sandboxes are removed at the end (unless kept). */
  const sessions = [sessionKey, `${sessionKey}-verify`];
  /** Each attempt's patch and transcript, with several (attempts.ts). */
  let attemptEnds: AttemptEnd[] = [];
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
  const setUp: AttemptContext["setUp"] = async (key, target, signal) => {
    if (!options.setup) return true;
    phase(`running the setup command \`${options.setup.command}\``);
    const run = await runSetupPhase({
      runner: options.runner,
      setup: options.setup,
      agentId: options.agentId,
      sessionKey: key,
      carryShare: request.carryShare,
      timeoutMs: testTimeoutMs,
      signal,
      onProgress: (message) => onProgress({ phase: "setup", message }),
      onEgress: ({ host, port, allowed }) =>
        options.onEvent?.({ type: "egress", host, port, allowed }),
    });
    (target.setupRuns ??= []).push(run);
    if (run.exitCode === 0) return true;
    Object.assign(target, {
      status: "setup_failed",
      // The environment, not the code: like environment_error.
      exitCode: ExitCode.environment,
      message: setupFailureMessage(run),
    });
    return false;
  };

  try {
    const attempts = attemptCount(options.attempts);
    phase("seeding a private copy and running the tests");
    let mark = Date.now();
    if (!(await setUp(sessionKey, result, options.signal))) {
      durations.setup = Date.now() - mark;
      return result;
    }
    const work = await options.runner.acquireSandbox({
      ...request,
      sessionKey,
      onProgress,
      readsChanges: true,
    });
    result.sessionKey = work.plan.sessionKey;
    project = work.plan.agent.workspaceId;
    const context: AttemptContext = {
      options,
      testTimeoutMs,
      carryShare: request.carryShare,
      workspace: work.plan.agent.workspace,
      setUp,
    };
    let held = true;
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

      if (attempts === 1) {
        phase(`tests fail (exit ${result.before.exitCode ?? "killed"}); running the agent`);
        // The attempt releases the work copy once it has taken the changes.
        held = false;
        await runAttempt(context, {
          sessionKey,
          end,
          signal: options.signal,
          model: options.attemptModels?.[0],
          onEvent: options.onEvent,
          onProgress,
          phase,
          work: work.lease,
        });
        return result;
      }
    } finally {
      if (held) await work.lease.release();
    }

    const copies =
      options.attemptCopies ??
      forkedAttemptCopies(options.runner, {
        agentId: options.agentId,
        carryShare: request.carryShare,
        onProgress,
      });
    phase(
      `tests fail (exit ${result.before.exitCode ?? "killed"}); ${attempts} agents at once, each in its own ${copies.kind === "fork" ? "fork of this copy" : "freshly seeded copy"}; the first verified fix wins`,
    );
    for (let index = 0; index < attempts; index += 1) {
      const key = attemptSessionKey(sessionKey, index);
      sessions.push(key, `${key}-verify`);
    }
    const ran = await runAttempts({
      context,
      base: result,
      from: sessionKey,
      count: attempts,
      copies,
      signal: options.signal,
      onEvent: options.onEvent,
      onProgress,
      phase,
    });
    attemptEnds = ran.ends;
    const chosen = mergeAttempts(result, ran.ends, ran.reports, ran.winner);
    end.patch = ran.ends[chosen]?.patch ?? new Uint8Array();
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
    const transcriptOf = async (key: string): Promise<string[]> =>
      (
        await readSessionEntries({
          stateDir: options.runner.stateDir,
          sessionKey: key,
          project,
        }).catch(() => [])
      ).map((entry) => JSON.stringify(entry));
    const extra: [string, string | Uint8Array][] = [];
    for (const [index, attempt] of attemptEnds.entries()) {
      const [patchName, transcriptName] = attemptArtifactNames(index);
      extra.push([patchName, attempt.patch]);
      extra.push([transcriptName, linesOf(await transcriptOf(attempt.result.sessionKey))]);
    }
    result.artifacts = await writeArtifacts(options.outDir, {
      result,
      transcriptLines: await transcriptOf(result.sessionKey),
      patch: end.patch,
      summary: renderSummary(result),
      extra,
    });
    if (!options.keepSandboxes) {
      // A CI job leaves nothing behind; the patch and transcript are in the artifacts. Each
      // removal on its own: one that fails leaves the others to be done.
      for (const key of sessions) {
        await options.runner
          .discardSandbox({ agentId: options.agentId, sessionKey: key })
          .catch((error: unknown) => {
            // A config that cannot be planned (an untrusted cordon.json5) made no sandbox: the
            // job already says why, once, rather than again for each session.
            if (error instanceof ConfigError) return;
            phase(`could not remove the sandbox of ${key}: ${messageOf(error)}`);
          });
      }
    }
  }
}
