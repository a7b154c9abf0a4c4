import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import { processState, throwIfAborted } from "../../common/index.js";
import { readSessionEntries } from "./jsonl-session.js";
import { readRunEvents, runEventsFileInfo, type RunEventRecord } from "./run-events-log.js";
import { readSessionLock } from "./session-lock.js";
import { sessionFiles, sessionKeyOf, sessionsDirectory, sessionsRoot } from "./session-name.js";

/** A session file found on disk. */
export interface SessionSummary {
  sessionKey: string;
  /** The project (workspace id) it belongs to; undefined for sessions kept without one. */
  project?: string | undefined;
  path: string;
  sizeBytes: number;
  /** Last write time. */
  updatedAt: Date;
}

/**
 * The sessions of one project (`project`, a workspace id), or of every project (`project`
 * undefined), most recently updated first.
 */
export async function listSessions(options: {
  stateDir: string;
  project?: string | undefined;
  signal?: AbortSignal | undefined;
}): Promise<SessionSummary[]> {
  const { stateDir, project, signal } = options;
  const projects =
    project === undefined
      ? [undefined, ...(await projectFolders(sessionsRoot(stateDir)))]
      : [project];
  const sessions: SessionSummary[] = [];
  for (const folder of projects) {
    sessions.push(...(await sessionsIn(sessionsDirectory(stateDir, folder), folder, signal)));
  }
  return sessions.sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime());
}

async function entriesOf(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
}

async function projectFolders(root: string): Promise<string[]> {
  const names = await entriesOf(root);
  return names.filter((name) => /^[0-9a-f]{1,64}$/.test(name));
}

async function sessionsIn(
  dir: string,
  project: string | undefined,
  signal: AbortSignal | undefined,
): Promise<SessionSummary[]> {
  const sessions: SessionSummary[] = [];
  for (const name of await entriesOf(dir)) {
    throwIfAborted(signal, "listing sessions");
    const sessionKey = sessionKeyOf(name);
    if (sessionKey === undefined) continue;
    const file = path.join(dir, name);
    const info = await stat(file).catch(() => undefined);
    if (!info?.isFile()) continue;
    sessions.push({ sessionKey, project, path: file, sizeBytes: info.size, updatedAt: info.mtime });
  }
  return sessions;
}

/** What `cordon sessions list` shows of a session beyond its file. */
export interface SessionDetails extends SessionSummary {
  /** The agent of its key (`agent:<id>:…`). */
  agentId?: string | undefined;
  /** The agent workspace its last recorded run worked on. */
  workspace?: string | undefined;
  /** `running` while a live run holds it, else the status of the last recorded run. */
  lastRunStatus?: string | undefined;
  /** Model calls kept in the transcript (assistant messages). */
  turns: number;
  /** Tokens of those calls, summed (input counts the prompt of every call). */
  tokens: { input: number; output: number };
  /** Last write to its transcript or events. */
  lastActivityAt: Date;
}

/** A session's summary with its agent, workspace, last run, turns and tokens. */
export async function sessionDetails(
  stateDir: string,
  summary: SessionSummary,
): Promise<SessionDetails> {
  const files = sessionFiles(stateDir, summary.sessionKey, summary.project);
  const entries = await readSessionEntries({
    stateDir,
    sessionKey: summary.sessionKey,
    project: summary.project,
  }).catch(() => []);
  const details: SessionDetails = {
    ...summary,
    agentId: /^agent:([^:]*):/.exec(summary.sessionKey)?.[1],
    turns: 0,
    tokens: { input: 0, output: 0 },
    lastActivityAt: summary.updatedAt,
  };
  for (const entry of entries) {
    if (entry.kind !== "message" || entry.role !== "assistant") continue;
    details.turns += 1;
    details.tokens.input += entry.usage?.inputTokens ?? 0;
    details.tokens.output += entry.usage?.outputTokens ?? 0;
  }
  const events = await runEventsFileInfo(files.events);
  if (events) {
    if (events.updatedAt > details.lastActivityAt) details.lastActivityAt = events.updatedAt;
    const last = await lastRunFacts(files.events);
    details.workspace = last.workspace;
    details.lastRunStatus = last.status;
  }
  const holder = await readSessionLock(files.lock).catch(() => undefined);
  if (holder && processState(holder) !== "dead") {
    details.lastRunStatus = "running";
    details.workspace ??= holder.workspace;
  }
  return details;
}

/** The workspace of the last `plan` and the status of the last `run-end`, from the file's end. */
async function lastRunFacts(
  eventsFile: string,
): Promise<{ workspace?: string | undefined; status?: string | undefined }> {
  const find = (records: RunEventRecord[]) => ({
    workspace: records.findLast((r) => r.type === "plan")?.["workspace"],
    status: records.findLast((r) => r.type === "run-end")?.["status"],
  });
  let found = find((await readRunEvents(eventsFile, -256 * 1024)).records);
  if (found.workspace === undefined || found.status === undefined) {
    found = find((await readRunEvents(eventsFile)).records);
  }
  return {
    workspace: typeof found.workspace === "string" ? found.workspace : undefined,
    status: typeof found.status === "string" ? found.status : undefined,
  };
}
