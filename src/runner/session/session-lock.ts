import { unlinkSync } from "node:fs";
import { writeFile } from "node:fs/promises";

import { z } from "zod";

import {
  AbortedError,
  CordonError,
  ExitCode,
  currentProcessIdentity,
  onProcessExit,
  unlinkIfPresent,
} from "../../common/index.js";
import {
  processIdentityShape,
  readLockFile,
  takeLockFile,
  type LockFile,
} from "../../common/process-lock.js";
import { sessionFiles } from "./session-name.js";

/**
 * The lock of a session: one file, `<sessions dir>/<name>.lock`, that exists while a run (of any
 * process on this machine) writes the session. It says who holds it, so a second run can name the
 * holder while it waits, `cordon ps` can list what runs, and a lock left by a process that died
 * (SIGKILL, a crash, a reboot) is recognised and taken over: a lock file held by a live process
 * (common/process-lock.ts).
 */
export const sessionLockHolderSchema = z.object({
  v: z.literal(1),
  ...processIdentityShape,
  /** The run holding the session. */
  runId: z.string(),
  sessionKey: z.string(),
  project: z.string().optional(),
  agentId: z.string().optional(),
  /** The agent workspace on the host, for `ps` and `sessions list`. */
  workspace: z.string().optional(),
  /** ISO 8601 time the lock was taken. */
  since: z.string(),
});
export type SessionLockHolder = z.infer<typeof sessionLockHolderSchema>;

/** Another run holds the session and the caller asked not to wait (`cordon run --no-wait`). */
export class SessionBusyError extends CordonError {
  readonly code = "session_busy";
  readonly exitCode = ExitCode.sandbox;
}

/** The lock file exists but cannot be read as one: cordon cannot tell whether it is held. */
export class SessionLockError extends CordonError {
  readonly code = "session_lock_unreadable";
  readonly exitCode = ExitCode.sandbox;
}

export interface AcquireSessionLockOptions {
  stateDir: string;
  sessionKey: string;
  project?: string | undefined;
  runId: string;
  agentId?: string | undefined;
  workspace?: string | undefined;
  /** Wait for the holder to finish (default), or throw `SessionBusyError` at once. */
  wait?: boolean | undefined;
  /** Called when the run starts waiting, and again whenever the holder changes. */
  onWait?: ((holder: SessionLockHolder) => void) | undefined;
  /** How often a waiting run looks at the lock again. Default 200 ms. */
  pollMs?: number | undefined;
  signal?: AbortSignal | undefined;
}

/** A held session lock. */
export interface SessionLock {
  readonly holder: SessionLockHolder;
  readonly path: string;
  /** Removes the lock if it is still this run's; calling it twice is harmless. */
  release(): Promise<void>;
}

/** How a holder is named in messages: `pid 4242 on box, since 2026-…Z, run 5f3c…`. */
export function describeHolder(holder: SessionLockHolder): string {
  return `pid ${holder.pid} on ${holder.host}, since ${holder.since}, run ${holder.runId}`;
}

/**
 * The file a run leaves beside the lock while it waits for it (`<name>.lock.wait.<pid>.<runId>`):
 * its own identity, so `cordon ps` lists runs that wait as well as the one that holds the session.
 * It only informs; it never orders the waiters (whoever polls first after the release wins).
 */
export function waitingFile(lockFile: string, waiter: { pid: number; runId: string }): string {
  return `${lockFile}${waitingSuffix}${waiter.pid}.${waiter.runId}`;
}

/** What follows a lock file's name in the name of a waiting run's file. */
export const waitingSuffix = ".wait.";

/**
 * Takes the session's lock, waiting (polling) while a live run holds it and taking over a lock
 * whose process is gone. While it waits, a `waitingFile` says so.
 */
export async function acquireSessionLock(options: AcquireSessionLockOptions): Promise<SessionLock> {
  const file = sessionFiles(options.stateDir, options.sessionKey, options.project).lock;
  const base: Omit<SessionLockHolder, "since"> = {
    v: 1,
    ...currentProcessIdentity(),
    runId: options.runId,
    sessionKey: options.sessionKey,
  };
  if (options.project !== undefined) base.project = options.project;
  if (options.agentId !== undefined) base.agentId = options.agentId;
  if (options.workspace !== undefined) base.workspace = options.workspace;
  let announced: SessionLockHolder | undefined;
  let waiting: string | undefined;
  let forgetWaiting: (() => void) | undefined;
  const markWaiting = async (): Promise<void> => {
    if (waiting !== undefined) return;
    const waitFile = waitingFile(file, base);
    waiting = waitFile;
    // Also gone when the process is made to exit while it waits (a second Ctrl-C).
    forgetWaiting = onProcessExit(() => unlinkSync(waitFile));
    // Best effort: a run that cannot say it waits still waits.
    const text = `${JSON.stringify({ ...base, since: new Date().toISOString() })}\n`;
    await writeFile(waitFile, text, { mode: 0o600 }).catch(() => undefined);
  };
  try {
    const held = await takeLockFile({
      ...sessionLockFile(file),
      record: () => ({ ...base, since: new Date().toISOString() }),
      pollMs: options.pollMs ?? 200,
      signal: options.signal,
      aborted: (reason) => {
        const by = announced ? `, held by ${describeHolder(announced)}` : "";
        return new AbortedError(`stopped waiting for session ${options.sessionKey}${by}`, {
          cause: reason,
        });
      },
      unreadable: () =>
        new SessionLockError(
          `The lock file of session ${options.sessionKey} (${file}) cannot be read, so cordon cannot tell whether a run holds it.`,
          { fix: `If no cordon run uses this session, delete ${file}.` },
        ),
      whileHeld: async (current) => {
        if (options.wait === false) {
          throw new SessionBusyError(
            `Session ${options.sessionKey} is in use by another run (${describeHolder(current)}).`,
            {
              fix: `Wait for it to end (\`cordon logs -f --session ${options.sessionKey}\` follows it) or use another --session; \`cordon run\` without --no-wait waits by itself.`,
            },
          );
        }
        if (announced?.runId === current.runId) return;
        announced = current;
        await markWaiting();
        options.onWait?.(current);
      },
    });
    return { holder: { ...held.holder }, path: held.file, release: () => held.release() };
  } finally {
    forgetWaiting?.();
    if (waiting !== undefined) await unlinkIfPresent(waiting).catch(() => undefined);
  }
}

/** The session lock as a lock file held by a live process: one take is one run's, at one time. */
export function sessionLockFile(file: string): LockFile<SessionLockHolder> {
  return {
    file,
    schema: sessionLockHolderSchema,
    sameTake: (a, b) => a.runId === b.runId && a.pid === b.pid && a.since === b.since,
  };
}

/** The holder of a session's lock, or undefined when no run (alive or dead) holds it. */
export async function readSessionLock(file: string): Promise<SessionLockHolder | undefined> {
  const holder = await readLockFile(file, sessionLockHolderSchema);
  return typeof holder === "string" ? undefined : holder;
}
