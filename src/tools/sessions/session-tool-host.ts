/**
 * What the session tools (sessions_spawn, sessions_send, sessions_list, sessions_history) ask of
 * the runner. The tools validate input and word results for the model; the host, bound to one
 * run by the runner, decides (through the policy) and does: it starts child runs, reads
 * transcripts and keeps the run records. A refusal is thrown as a `PolicyDeniedError` naming the
 * config key, and becomes an error result like any tool failure.
 */

/** How a child run ended, in the run record's words. */
export type SubagentOutcome = "ok" | "error" | "timeout";

/** What happens to a child's session when its run ends. */
export type SubagentCleanup = "keep" | "delete";

export interface SpawnRequest {
  /** What the child is to do: its first (and only) user message. */
  task: string;
  /** The child's agent; default the requester's own. */
  agentId?: string | undefined;
  /** The child's model; default `subagents.model`, else its agent's. */
  model?: string | undefined;
  /** A short name for people reading lists and events. */
  label?: string | undefined;
  cleanup: SubagentCleanup;
  /** Wall-clock limit of the child run, in seconds; default none (the tool call's limit holds). */
  timeoutSec?: number | undefined;
}

export interface SendRequest {
  /** A full key (`agent:<id>:<name>`) or a name of the requester's agent. */
  sessionKey: string;
  message: string;
  timeoutSec?: number | undefined;
}

/** The end of a child run (a spawn, or a message sent to a session). */
export interface ChildRunResult {
  runId: string;
  sessionKey: string;
  agentId: string;
  outcome: SubagentOutcome;
  /** The run's status (`completed`, `limit_turns`, `timeout`, …). */
  status: string;
  /** The child's final answer. */
  finalText: string;
  message?: string | undefined;
  fix?: string | undefined;
  turns: number;
  durationMs: number;
  /** The session was removed after the run (`cleanup: "delete"`). */
  deleted?: boolean | undefined;
}

export interface SessionListing {
  sessionKey: string;
  agentId?: string | undefined;
  /** The session that spawned it, when a run record says so. */
  spawnedBy?: string | undefined;
  label?: string | undefined;
  /** `running`, or the last run's status, or the spawn's outcome. */
  status?: string | undefined;
  /** ISO time of the last write. */
  updatedAt: string;
}

export interface HistoryEntry {
  /** `user`, `assistant`, `compaction` or `reset`. */
  role: string;
  text: string;
  ts: string;
}

export interface SessionHistory {
  sessionKey: string;
  entries: HistoryEntry[];
  /** Entries in the transcript; `entries` are the newest of them. */
  total: number;
}

/** Per call: the call's signal (abort, run timeout, tools.callTimeoutSec) and its id. */
export interface SessionCallOptions {
  signal: AbortSignal;
  toolCallId: string;
}

export interface SessionToolHost {
  spawn(request: SpawnRequest, call: SessionCallOptions): Promise<ChildRunResult>;
  send(request: SendRequest, call: SessionCallOptions): Promise<ChildRunResult>;
  list(request: { limit: number }, call: SessionCallOptions): Promise<SessionListing[]>;
  history(
    request: { sessionKey: string; limit: number; includeTools: boolean },
    call: SessionCallOptions,
  ): Promise<SessionHistory>;
}
