import { readdir } from "node:fs/promises";
import path from "node:path";

import { processState } from "../../common/index.js";
import { readRunEvents, type RunEventRecord } from "./run-events-log.js";
import { readSessionLock, waitingSuffix, type SessionLockHolder } from "./session-lock.js";
import { sessionsRoot } from "./session-name.js";

/** A session lock found on disk: a run in progress, or one that died holding it. */
export interface LockedSession {
  holder: SessionLockHolder;
  /** `alive`: the run is in progress; `dead`: its process is gone (the next run takes it over); `unknown`: held on another host. */
  state: "alive" | "dead" | "unknown";
  lockFile: string;
  /** The session's events file (see `RunEventsLog`). */
  eventsFile: string;
}

/** A run waiting for a session another run holds (it has no lock yet; see `waitingFile`). */
export interface WaitingRun {
  /** The waiting run, as its lock will name it. */
  waiter: SessionLockHolder;
  /** The lock it waits for. */
  lockFile: string;
}

/** The sessions directories under the state directory: the root and one per project. */
async function sessionFolders(stateDir: string): Promise<string[]> {
  const root = sessionsRoot(stateDir);
  const folders = [root];
  for (const name of await entriesOf(root)) {
    if (/^[0-9a-f]{1,64}$/.test(name)) folders.push(path.join(root, name));
  }
  return folders;
}

/**
 * Runs (of any process) waiting for a session, oldest first. A file left by a waiter that died
 * (SIGKILL) is skipped: it waits for nothing.
 */
export async function listWaitingRuns(options: { stateDir: string }): Promise<WaitingRun[]> {
  const found: WaitingRun[] = [];
  for (const folder of await sessionFolders(options.stateDir)) {
    for (const name of await entriesOf(folder)) {
      const at = name.indexOf(`.lock${waitingSuffix}`);
      if (at < 0) continue;
      const waiter = await readSessionLock(path.join(folder, name)).catch(() => undefined);
      if (!waiter || processState(waiter) === "dead") continue;
      found.push({ waiter, lockFile: path.join(folder, name.slice(0, at + ".lock".length)) });
    }
  }
  return found.sort((a, b) => a.waiter.since.localeCompare(b.waiter.since));
}

/** Every session lock under the state directory, in every project, oldest first. */
export async function listLockedSessions(options: { stateDir: string }): Promise<LockedSession[]> {
  const found: LockedSession[] = [];
  for (const folder of await sessionFolders(options.stateDir)) {
    for (const name of await entriesOf(folder)) {
      if (!name.endsWith(".lock")) continue;
      const lockFile = path.join(folder, name);
      const holder = await readSessionLock(lockFile).catch(() => undefined);
      if (!holder) continue;
      found.push({
        holder,
        state: processState(holder),
        lockFile,
        eventsFile: `${lockFile.slice(0, -".lock".length)}.events.jsonl`,
      });
    }
  }
  return found.sort((a, b) => a.holder.since.localeCompare(b.holder.since));
}

async function entriesOf(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
}

/** What one run's events say about it so far. */
export interface RunActivity {
  /** The container (or `host`) from its `sandbox-ready` event. */
  sandbox?: string | undefined;
  /** Model calls started. */
  turns: number;
  /** What it does now (or how it ended), as a phrase. */
  doing: string;
  /** While a tool runs: the last line of its output so far (`tool-output`), once it printed one. */
  output?: string | undefined;
  /** Time of its last event. */
  lastEventAt?: string | undefined;
  /** Its `run-end` status, once it ended. */
  status?: string | undefined;
  /** The MCP client driving it (`cordon mcp`), from its `run-start`. */
  client?: string | undefined;
  /** Requests its egress proxy refused (`egress` events with `allowed: false`). */
  egressRefused: number;
  /** The host of the last refused request. */
  lastRefusedHost?: string | undefined;
}

/** Bytes of the end of an events file that hold a run in progress, in practice. */
const tailBytes = 1024 * 1024;

/** The activity of run `runId`, from the end of a session's events file. */
export async function readRunActivity(eventsFile: string, runId: string): Promise<RunActivity> {
  let { records } = await readRunEvents(eventsFile, -tailBytes);
  if (!records.some((record) => record.runId === runId && record.type === "run-start")) {
    ({ records } = await readRunEvents(eventsFile));
  }
  return summarizeRun(records.filter((record) => record.runId === runId));
}

/** The activity of one run from its records, in order. */
export function summarizeRun(records: readonly RunEventRecord[]): RunActivity {
  const activity: RunActivity = { turns: 0, doing: "starting", egressRefused: 0 };
  for (const record of records) {
    activity.lastEventAt = record.ts;
    // A proxy's decision comes while a command runs: its output line stays.
    if (record.type !== "tool-output" && record.type !== "egress") activity.output = undefined;
    switch (record.type) {
      case "run-start":
        if (typeof record["client"] === "string") activity.client = record["client"];
        break;
      case "session-wait":
        activity.doing = "waiting for the session";
        break;
      case "sandbox-progress":
        activity.doing = `preparing the sandbox: ${String(record["message"])}`;
        break;
      case "sandbox-ready":
        activity.sandbox = String(record["container"]);
        activity.doing = "sandbox ready";
        break;
      case "model-start":
        activity.turns = Math.max(activity.turns, Number(record["turn"]) || 0);
        activity.doing = `waiting for the model (turn ${activity.turns})`;
        break;
      case "retry":
        activity.doing = `retrying the model call: ${String(record["reason"])}`;
        break;
      case "tool-call":
        activity.doing = `running ${String(record["name"])}${toolDetail(record["input"])}`;
        break;
      case "tool-output":
        if (typeof record["lastLine"] === "string" && record["lastLine"] !== "") {
          activity.output = record["lastLine"];
        }
        break;
      case "tool-result":
        activity.doing = `${String(record["name"])} finished`;
        break;
      case "compaction":
        activity.doing = "compacting older turns";
        break;
      case "egress":
        if (record["allowed"] === false) {
          activity.egressRefused += 1;
          activity.lastRefusedHost = String(record["host"]);
        }
        break;
      case "run-end":
        activity.status = String(record["status"]);
        activity.doing = `ended: ${activity.status}`;
        break;
    }
  }
  return activity;
}

function toolDetail(input: unknown): string {
  if (typeof input !== "object" || input === null) return "";
  const fields = input as Record<string, unknown>;
  const main = fields["command"] ?? fields["path"] ?? fields["pattern"];
  if (typeof main !== "string") return "";
  const oneLine = main.replace(/\s+/g, " ").trim();
  return ` ${oneLine.length > 60 ? `${oneLine.slice(0, 59)}…` : oneLine}`;
}
