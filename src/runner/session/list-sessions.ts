import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import { throwIfAborted } from "../../common/index.js";
import { sessionKeyOf, sessionsDirectory, sessionsRoot } from "./session-name.js";

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
