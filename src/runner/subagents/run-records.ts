import { randomUUID } from "node:crypto";
import { mkdir, readFile, readdir, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";

import { z } from "zod";

/**
 * One record per subagent run (`sessions_spawn`): who asked (the requester's session), which
 * child session it made, the task, the cleanup asked for and how it ended. Kept as one small
 * JSON file a run under `<state dir>/subagent-runs/`, written whole (aside, then renamed), so a
 * reader in another process never sees half of one. The records are what "a session sees the
 * subagents it spawned" and `cordon sessions list`'s PARENT column are made of.
 */

const recordSchema = z.object({
  v: z.literal(1),
  runId: z.string().regex(/^[A-Za-z0-9-]{1,64}$/),
  childSessionKey: z.string().min(1).max(200),
  childAgentId: z.string().min(1).max(100),
  /** The child's project (workspace id), where its transcript lives. */
  childProject: z.string().optional(),
  requesterSessionKey: z.string().min(1).max(200),
  requesterAgentId: z.string().min(1).max(100),
  requesterProject: z.string().optional(),
  /** The requester's run that spawned it. */
  requesterRunId: z.string().max(100).optional(),
  /** The task, cut to its first 2000 characters. */
  task: z.string(),
  label: z.string().optional(),
  model: z.string().optional(),
  cleanup: z.enum(["keep", "delete"]),
  createdAt: z.string(),
  endedAt: z.string().optional(),
  /** Absent while the child runs. */
  outcome: z.enum(["ok", "error", "timeout"]).optional(),
  /** The child run's status (completed, limit_turns, aborted, …). */
  status: z.string().optional(),
  message: z.string().optional(),
  /** The child's session was removed (cleanup delete). */
  deleted: z.boolean().optional(),
});

export type SubagentRunRecord = z.infer<typeof recordSchema>;

/** Longest task text kept in a record. */
const maxTaskChars = 2000;

/** `<state dir>/subagent-runs`. */
export function runRecordsDirectory(stateDir: string): string {
  return path.join(stateDir, "subagent-runs");
}

/** Writes (or replaces) one record, whole. */
export async function writeRunRecord(stateDir: string, record: SubagentRunRecord): Promise<void> {
  const parsed = recordSchema.parse({ ...record, task: record.task.slice(0, maxTaskChars) });
  const dir = runRecordsDirectory(stateDir);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const file = path.join(dir, `${parsed.runId}.json`);
  const aside = `${file}.${randomUUID()}.tmp`;
  try {
    await writeFile(aside, `${JSON.stringify(parsed)}\n`, { mode: 0o600 });
    await rename(aside, file);
  } catch (error) {
    await rm(aside, { force: true });
    throw error;
  }
}

/**
 * Every record, oldest first. A file that is not a record (a crash left a temp file, someone
 * edited one) is skipped: records inform listings and visibility, and a missing one only hides.
 */
export async function readRunRecords(stateDir: string): Promise<SubagentRunRecord[]> {
  const dir = runRecordsDirectory(stateDir);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
  const records: SubagentRunRecord[] = [];
  for (const name of names) {
    if (!name.endsWith(".json")) continue;
    try {
      const text = await readFile(path.join(dir, name), "utf8");
      if (text.length > 64 * 1024) continue;
      const parsed = recordSchema.safeParse(JSON.parse(text));
      if (parsed.success) records.push(parsed.data);
    } catch {
      // gone meanwhile, or not JSON: skipped
    }
  }
  return records.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
}
