import {
  CordonError,
  ExitCode,
  describeAbort,
  exitCodeOf,
  exitCodeOfAbort,
  messageOf,
  systemErrorFix,
  type ExitCode as ExitCodeValue,
} from "../../common/index.js";
import type { ModelUsage, PlanRequest, RunCost, Runner, RunnerEvent } from "../../runner/index.js";
import { runAttempt, type AttemptContext, type AttemptEnd } from "./attempt.js";
import type { FixTestsResult, FixTestsStatus } from "./fix-tests.js";
import { raceAttempts, type RaceEntry } from "./race.js";

/** Most attempts one job may start: each is an agent run and two sandboxes at once. */
export const maxAttempts = 8;

/** An attempt's end: a job's statuses, or `stopped` because another attempt's fix won first. */
export type AttemptStatus = FixTestsStatus | "stopped";

/** One attempt as result.json, summary.md and the `attempt-end` event report it. */
export interface AttemptReport {
  /** 1-based. */
  attempt: number;
  sessionKey: string;
  status: AttemptStatus;
  exitCode: ExitCodeValue;
  message: string;
  /** Its fix was the first verified: the job's patch is this one. */
  won: boolean;
  /** Model calls of its agent run (0 when it never started). */
  turns: number;
  usage: ModelUsage;
  cost: RunCost;
  model?: string | undefined;
  /** Its agent run and its verification, in milliseconds. */
  durationMs: number;
  filesChanged: string[];
  /** Its verification run on a clean copy, when it got that far. */
  verification?: { exitCode: number | null; timedOut: boolean } | undefined;
  /** Its own patch and transcript among the artifacts (file names in the output directory). */
  artifacts: string[];
}

/**
 * How the attempts' private copies are made. `fork`: copies of the seeded copy the tests ran in,
 * as it is, made before any attempt starts. `seed`: each attempt's copy seeded afresh from the
 * repository when its agent starts, with the setup command run in it first, as the first copy was.
 */
export interface AttemptCopies {
  readonly kind: "fork" | "seed";
  make(request: {
    from: string;
    sessionKeys: readonly string[];
    signal?: AbortSignal | undefined;
  }): Promise<void>;
}

/** Copies seeded afresh: nothing to make ahead, the agent run's acquire seeds each. */
export const seededAttemptCopies: AttemptCopies = { kind: "seed", make: () => Promise.resolve() };

/**
 * Forks of the seeded copy (`runner.forkSandbox`: a throwaway container copies it, the trust
 * boundary's rule 1), so each attempt starts where the tests ran — set up, built, with the same
 * baseline for its patch. One after another: the parent is frozen while each is copied.
 */
export function forkedAttemptCopies(
  runner: Runner,
  request: Pick<PlanRequest, "agentId" | "carryShare"> & {
    onProgress?: ((progress: { phase: string; message: string }) => void) | undefined;
  },
): AttemptCopies {
  return {
    kind: "fork",
    async make({ from, sessionKeys, signal }) {
      for (const as of sessionKeys) {
        const fork = await runner.forkSandbox({ ...request, sessionKey: from, as, signal });
        await fork.lease.release();
      }
    },
  };
}

/** Events of a job with several attempts, beside the run events of one. */
export type AttemptEvent =
  /** An event of attempt `attempt`'s agent run or sandboxes, nested whole. */
  | { type: "attempt"; attempt: number; sessionKey: string; event: RunnerEvent }
  /** An attempt has ended (its report); the winner's comes before the stopped attempts'. */
  | ({ type: "attempt-end" } & AttemptReport);

const noUsage: ModelUsage = {
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
};

/** The session of attempt `index` (0-based) of a job. */
export function attemptSessionKey(jobKey: string, index: number): string {
  return `${jobKey}-a${index + 1}`;
}

/** The artifacts of attempt `index` (0-based): its patch, then its transcript. */
export function attemptArtifactNames(index: number): [string, string] {
  return [`attempt-${index + 1}.patch`, `attempt-${index + 1}.transcript.jsonl`];
}

/** An attempt that threw: stopped by the job's signal, or an error with its fix. */
export function failedAttempt(
  end: AttemptEnd,
  error: unknown,
  signal: AbortSignal | undefined,
): AttemptEnd {
  if (signal?.aborted) {
    Object.assign(end.result, {
      status: "error",
      exitCode: exitCodeOfAbort(signal),
      message: describeAbort(signal),
    });
    return end;
  }
  Object.assign(end.result, {
    status: "error",
    exitCode: exitCodeOf(error),
    message: messageOf(error),
  });
  const fix = CordonError.is(error) ? error.fix : systemErrorFix(error);
  if (fix !== undefined) end.result.fix = fix;
  return end;
}

/** What one attempt reports; `stopped` overrides its own end. */
export function attemptReport(
  index: number,
  entry: RaceEntry<AttemptEnd>,
  options: { won: boolean; winner: number | undefined },
): AttemptReport {
  const { result } = entry.outcome;
  const agent = result.agent;
  const report: AttemptReport = {
    attempt: index + 1,
    sessionKey: result.sessionKey,
    status: result.status,
    exitCode: result.exitCode,
    message: result.message,
    won: options.won,
    turns: agent?.turns ?? 0,
    usage: agent?.usage ?? noUsage,
    cost: agent?.cost ?? { usd: 0 },
    model: agent?.model,
    durationMs: result.durationsMs.agent + result.durationsMs.verify,
    filesChanged: result.filesChanged.map((file) => file.path),
    verification: result.verification && {
      exitCode: result.verification.exitCode,
      timedOut: result.verification.timedOut,
    },
    artifacts: attemptArtifactNames(index),
  };
  if (entry.stopped && options.winner !== undefined) {
    Object.assign(report, {
      status: "stopped",
      exitCode: ExitCode.interrupted,
      message: `Stopped: attempt ${options.winner + 1}'s fix was verified first.`,
    });
  }
  return report;
}

/** The cost of all attempts: unknown (with the reason) when any one's is. */
export function totalCost(costs: readonly RunCost[]): RunCost {
  const unknown = costs.find((cost) => cost.usd === null);
  if (unknown) return unknown;
  const usd = costs.reduce((sum, cost) => sum + (cost.usd ?? 0), 0);
  return { usd: Math.round(usd * 1e6) / 1e6 };
}

/**
 * Which failure speaks for the job when no attempt won: the one that got furthest (a patch that
 * was verified and failed says most, then a rejected patch, no changes, an agent that stopped,
 * a setup that failed, an error); the lowest attempt number among equals.
 */
const furthest: readonly AttemptStatus[] = [
  "verification_failed",
  "same_failure",
  "protected_files_changed",
  "binary_files_changed",
  "no_changes",
  "agent_stopped",
  "setup_failed",
  "error",
];

export function representativeAttempt(reports: readonly AttemptReport[]): number {
  let best = 0;
  const rank = (status: AttemptStatus): number => {
    const at = furthest.indexOf(status);
    return at < 0 ? furthest.length : at;
  };
  for (const [index, report] of reports.entries()) {
    if (rank(report.status) < rank(reports[best]?.status ?? "error")) best = index;
  }
  return best;
}

function outcomeLine(report: AttemptReport): string {
  return `attempt ${report.attempt} ${report.won ? "won" : report.status.replaceAll("_", " ")}`;
}

/**
 * The job's result from its attempts': the winner's (or, with none, the furthest failure's)
 * patch, agent, verification and verdict, the attempts' summed cost, and every attempt's report.
 * Returns the index of the attempt it speaks for.
 */
export function mergeAttempts(
  result: FixTestsResult,
  ends: readonly AttemptEnd[],
  reports: readonly AttemptReport[],
  winner: number | undefined,
): number {
  const chosen = winner ?? representativeAttempt(reports);
  const end = ends[chosen];
  if (!end) throw new Error(`no attempt ${chosen + 1}`);
  const {
    durationsMs,
    durationMs: _durationMs,
    artifacts: _artifacts,
    cost: _cost,
    ...decided
  } = end.result;
  Object.assign(result, decided);
  result.durationsMs.agent = durationsMs.agent;
  result.durationsMs.verify = durationsMs.verify;
  result.cost = totalCost(reports.map((report) => report.cost));
  result.attempts = [...reports];
  const others = reports.filter((_, index) => index !== chosen).map(outcomeLine);
  if (winner !== undefined) {
    result.winner = winner + 1;
    result.message = `Attempt ${winner + 1} of ${reports.length} won. ${result.message}${others.length > 0 ? ` (The others: ${others.join("; ")}.)` : ""}`;
  } else {
    result.message = `No attempt's fix was verified (${reports.map(outcomeLine).join("; ")}). Attempt ${chosen + 1}: ${result.message}`;
  }
  return chosen;
}

export interface RunAttemptsRequest {
  context: AttemptContext;
  /** The job's result after the run before the agent; each attempt fills a copy of it. */
  base: FixTestsResult;
  /** The seeded session the tests ran in. */
  from: string;
  count: number;
  copies: AttemptCopies;
  signal: AbortSignal | undefined;
  onEvent: ((event: RunnerEvent | AttemptEvent) => void) | undefined;
  onProgress: (progress: { phase: string; message: string }) => void;
  phase: (message: string) => void;
}

export interface AttemptsEnd {
  ends: AttemptEnd[];
  reports: AttemptReport[];
  winner: number | undefined;
}

/**
 * N attempts at once, each in its own copy of the seeded one; the first verified fix wins and
 * the others are stopped. Their agent runs take the runner's lanes, so the runner's concurrency
 * bounds them. Every attempt has settled when this returns; removing their sandboxes is the
 * caller's (with the job's own, whatever happened).
 */
export async function runAttempts(request: RunAttemptsRequest): Promise<AttemptsEnd> {
  const { context, base, count, signal, onEvent } = request;
  const keys = Array.from({ length: count }, (_, index) => attemptSessionKey(request.from, index));
  await request.copies.make({ from: request.from, sessionKeys: keys, signal });
  const ends: AttemptEnd[] = keys.map((sessionKey) => ({
    result: { ...structuredClone(base), sessionKey },
    patch: new Uint8Array(),
  }));
  let winner: number | undefined;
  const race = await raceAttempts<AttemptEnd>({
    count,
    signal,
    won: (end) => end.result.status === "fixed",
    failed: (index, error) => failedAttempt(ends[index] as AttemptEnd, error, signal),
    onWin: (index) => {
      winner = index;
      request.phase(`attempt ${index + 1}: verified; stopping the others`);
    },
    onSettled: (index, entry) =>
      onEvent?.({
        type: "attempt-end",
        ...attemptReport(index, entry, { won: index === winner, winner }),
      }),
    run: async (index, attemptSignal) => {
      const end = ends[index] as AttemptEnd;
      const sessionKey = keys[index] as string;
      const nest = (event: RunnerEvent): void =>
        onEvent?.({ type: "attempt", attempt: index + 1, sessionKey, event });
      if (request.copies.kind === "seed") {
        if (!(await context.setUp(sessionKey, end.result, attemptSignal))) return end;
      }
      await runAttempt(context, {
        sessionKey,
        end,
        signal: attemptSignal,
        model: context.options.attemptModels?.[index],
        onEvent: nest,
        onProgress: (progress) => nest({ type: "sandbox-progress", ...progress }),
        phase: (message) => request.phase(`attempt ${index + 1}: ${message}`),
      });
      return end;
    },
  });
  const reports = race.entries.map((entry, index) =>
    attemptReport(index, entry, { won: index === race.winner, winner: race.winner }),
  );
  return { ends, reports, winner: race.winner };
}
