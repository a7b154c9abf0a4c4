import { exitCodeForStatus, type RunEvent, type RunResult } from "../loop/index.js";

/**
 * The two events that frame a run are built here only: `runTask` frames every agent run with
 * them, and an MCP session (a run whose turns its client's model takes) frames itself with the
 * same, so `cordon ps` and `cordon logs` read one shape.
 */
export function runStartEvent(run: {
  runId: string;
  sessionKey: string;
  /** The model asked for; "" when the run has none of its own (an MCP client has it). */
  model: string;
  /** Who drives the run when it is not cordon's loop (an MCP client's name and version). */
  client?: string | undefined;
}): Extract<RunEvent, { type: "run-start" }> {
  return { type: "run-start", ...run };
}

export function runEndEvent(result: RunResult): Extract<RunEvent, { type: "run-end" }> {
  return { type: "run-end", ...result };
}

/**
 * The result of a run that made no model call of its own (an MCP session): ended by its client
 * (`completed`) or by a signal (`aborted`).
 */
export function turnlessRunResult(run: {
  runId: string;
  sessionKey: string;
  status: "completed" | "aborted";
  /** `Date.now()` when the run began. */
  startedAt: number;
}): RunResult {
  return {
    runId: run.runId,
    sessionKey: run.sessionKey,
    status: run.status,
    exitCode: exitCodeForStatus(run.status),
    turns: 0,
    usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
    durationMs: Date.now() - run.startedAt,
    cost: { usd: 0 },
    finalText: "",
  };
}
