import { randomUUID } from "node:crypto";
import { readFileSync, unlinkSync } from "node:fs";
import { link, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";

import { z } from "zod";

import {
  AbortedError,
  CordonError,
  ExitCode,
  createExclusive,
  currentProcessIdentity,
  onProcessExit,
  processState,
  sleep,
  unlinkIfPresent,
} from "../../common/index.js";
import { sessionFiles } from "./session-name.js";

/**
 * The lock of a session: one file, `<sessions dir>/<name>.lock`, that exists while a run (of any
 * process on this machine) writes the session. It says who holds it, so a second run can name the
 * holder while it waits, `cordon ps` can list what runs, and a lock left by a process that died
 * (SIGKILL, a crash, a reboot) is recognised and taken over.
 *
 * Why a file of our own and not a library such as proper-lockfile: those judge a lock stale by
 * its age (the holder touches it every few seconds), so a dead holder blocks the session for the
 * stale period and a stopped but living one (SIGSTOP, a debugger) loses it. Here a lock is stale
 * exactly when its process is gone: the pid is checked together with the process's start time and
 * boot id, so a pid reused by an unrelated process does not keep a dead run's lock alive.
 */
export const sessionLockHolderSchema = z.object({
  v: z.literal(1),
  pid: z.number().int().positive(),
  host: z.string(),
  startTicks: z.number().int().optional(),
  bootId: z.string().optional(),
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
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const holder: SessionLockHolder = {
    v: 1,
    ...currentProcessIdentity(),
    runId: options.runId,
    sessionKey: options.sessionKey,
    since: new Date().toISOString(),
  };
  if (options.project !== undefined) holder.project = options.project;
  if (options.agentId !== undefined) holder.agentId = options.agentId;
  if (options.workspace !== undefined) holder.workspace = options.workspace;
  const pollMs = options.pollMs ?? 200;
  let waiting: string | undefined;
  let forgetWaiting: (() => void) | undefined;
  try {
    return await takeLock(file, holder, pollMs, options, async () => {
      if (waiting !== undefined) return;
      const waitFile = waitingFile(file, holder);
      waiting = waitFile;
      // Also gone when the process is made to exit while it waits (a second Ctrl-C).
      forgetWaiting = onProcessExit(() => unlinkSync(waitFile));
      // Best effort: a run that cannot say it waits still waits.
      await writeFile(waitFile, lockText(holder), { mode: 0o600 }).catch(() => undefined);
    });
  } finally {
    forgetWaiting?.();
    if (waiting !== undefined) await unlinkIfPresent(waiting).catch(() => undefined);
  }
}

async function takeLock(
  file: string,
  holder: SessionLockHolder,
  pollMs: number,
  options: AcquireSessionLockOptions,
  markWaiting: () => Promise<void>,
): Promise<SessionLock> {
  let announced: SessionLockHolder | undefined;
  for (;;) {
    if (options.signal?.aborted) {
      const held = announced ? `, held by ${describeHolder(announced)}` : "";
      throw new AbortedError(`stopped waiting for session ${options.sessionKey}${held}`, {
        cause: options.signal.reason,
      });
    }
    holder.since = new Date().toISOString();
    if (await createExclusive(file, lockText(holder))) return heldLock(file, holder);
    const current = await readHolder(file);
    if (current === "missing") continue;
    if (current === "unreadable") {
      throw new SessionLockError(
        `The lock file of session ${options.sessionKey} (${file}) cannot be read, so cordon cannot tell whether a run holds it.`,
        { fix: `If no cordon run uses this session, delete ${file}.` },
      );
    }
    if (processState(current) === "dead") {
      await breakStaleLock(file, current, holder);
      continue;
    }
    if (options.wait === false) {
      throw new SessionBusyError(
        `Session ${options.sessionKey} is in use by another run (${describeHolder(current)}).`,
        {
          fix: `Wait for it to end (\`cordon logs -f --session ${options.sessionKey}\` follows it) or use another --session; \`cordon run\` without --no-wait waits by itself.`,
        },
      );
    }
    if (announced?.runId !== current.runId) {
      announced = current;
      await markWaiting();
      options.onWait?.(current);
    }
    // An interrupt while asleep is reported by the check at the top, naming what was stopped.
    await sleep(pollMs, options.signal).catch(() => undefined);
  }
}

/** The holder of a session's lock, or undefined when no run (alive or dead) holds it. */
export async function readSessionLock(file: string): Promise<SessionLockHolder | undefined> {
  const holder = await readHolder(file);
  return typeof holder === "string" ? undefined : holder;
}

function heldLock(file: string, holder: SessionLockHolder): SessionLock {
  let released = false;
  // A process made to exit (a second Ctrl-C) skips `release`: the lock goes all the same.
  const forget = onProcessExit(() => {
    if (holderRunIdSync(file) === holder.runId) unlinkSync(file);
  });
  return {
    holder: { ...holder },
    path: file,
    async release() {
      if (released) return;
      released = true;
      forget();
      const current = await readHolder(file);
      // Never remove a lock that is no longer ours (it cannot be taken from a live process, but
      // a lock file deleted and re-made by hand must not be dropped by the run that ends here).
      if (typeof current !== "string" && current.runId === holder.runId) {
        await unlinkIfPresent(file);
      }
    },
  };
}

/** The run id in a lock file, read synchronously (at exit); undefined when unreadable. */
function holderRunIdSync(file: string): string | undefined {
  const parsed = sessionLockHolderSchema.safeParse(JSON.parse(readFileSync(file, "utf8")));
  return parsed.success ? parsed.data.runId : undefined;
}

/** A lock file's text: its holder as one JSON line. */
function lockText(record: SessionLockHolder): string {
  return `${JSON.stringify(record)}\n`;
}

async function readHolder(file: string): Promise<SessionLockHolder | "missing" | "unreadable"> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "missing";
    throw error;
  }
  try {
    const parsed = sessionLockHolderSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : "unreadable";
  } catch {
    return "unreadable";
  }
}

function sameHolder(a: SessionLockHolder, b: SessionLockHolder): boolean {
  return a.runId === b.runId && a.pid === b.pid && a.since === b.since;
}

/**
 * Removes the lock of a dead holder. Two runs may find the same dead lock; if both simply deleted
 * it, the slower one could delete the fresh lock the faster one made after it. So removal happens
 * only under a second lock, `<lock>.break` (held for a read and an unlink), after reading the
 * lock again: a lock made since then has a live holder and is left alone. Exported for tests.
 */
export async function breakStaleLock(
  file: string,
  dead: SessionLockHolder,
  breaker: SessionLockHolder,
): Promise<void> {
  const breakFile = `${file}.break`;
  if (!(await createExclusive(breakFile, lockText(breaker)))) {
    const other = await readHolder(breakFile);
    // A breaker that died between its two steps leaves its file; it is removed the same careful
    // way (moved aside and checked), and the next pass of the caller tries again.
    if (typeof other !== "string" && processState(other) === "dead") {
      await removeIfStill(breakFile, other);
    }
    await sleep(10);
    return;
  }
  try {
    const current = await readHolder(file);
    if (typeof current !== "string" && sameHolder(current, dead)) await unlinkIfPresent(file);
  } finally {
    await unlinkIfPresent(breakFile);
  }
}

/** Moves `file` aside, and deletes it only if it still holds `expected`; otherwise puts it back. */
async function removeIfStill(file: string, expected: SessionLockHolder): Promise<void> {
  const aside = `${file}.${process.pid}.${randomUUID()}.stale`;
  try {
    await rename(file, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  const moved = await readHolder(aside);
  if (typeof moved === "string" || !sameHolder(moved, expected)) {
    await link(aside, file).catch(() => undefined);
  }
  await unlinkIfPresent(aside);
}
