import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import { throwIfAborted } from "../../common/index.js";
import { sessionKeyOf, sessionsDirectory } from "./session-name.js";

/** A session file found on disk. */
export interface SessionSummary {
  sessionKey: string;
  path: string;
  sizeBytes: number;
  /** Last write time. */
  updatedAt: Date;
}

/** The sessions under `<stateDir>/sessions`, most recently updated first. */
export async function listSessions(options: {
  stateDir: string;
  signal?: AbortSignal | undefined;
}): Promise<SessionSummary[]> {
  const dir = sessionsDirectory(options.stateDir);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
  const sessions: SessionSummary[] = [];
  for (const name of names) {
    throwIfAborted(options.signal, "listing sessions");
    const sessionKey = sessionKeyOf(name);
    if (sessionKey === undefined) continue;
    const file = path.join(dir, name);
    const info = await stat(file).catch(() => undefined);
    if (!info?.isFile()) continue;
    sessions.push({ sessionKey, path: file, sizeBytes: info.size, updatedAt: info.mtime });
  }
  return sessions.sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime());
}
