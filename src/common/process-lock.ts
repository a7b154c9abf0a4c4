import { randomUUID } from "node:crypto";
import { readFileSync, unlinkSync } from "node:fs";
import { link, mkdir, readFile, rename } from "node:fs/promises";
import path from "node:path";

import { z } from "zod";

import { sleep } from "./abort.js";
import { createExclusive, unlinkIfPresent } from "./exclusive-file.js";
import { onProcessExit } from "./exit-cleanup.js";
import { processState, type ProcessIdentity } from "./process-identity.js";

/**
 * A lock file held by a live process: it exists while its holder (a process on this machine) holds
 * what it guards, and says who that is, so a waiter can name the holder and a file left by a
 * process that died (SIGKILL, a crash, a reboot) is recognised and taken over at once.
 *
 * Why not a library such as proper-lockfile: those judge a lock stale by its age (the holder
 * touches it every few seconds), so a dead holder blocks for the stale period and a stopped but
 * living one (SIGSTOP, a debugger) loses its lock. Here a lock is stale exactly when its process
 * is gone (`processState`: pid, start time and boot id, so a reused pid keeps nothing alive); a
 * holder on another host (a shared state directory) is never judged stale.
 *
 * The session lock (runner/session/session-lock.ts) and a sandbox's freeze marker
 * (sandbox/docker/freeze-marker.ts) are both this, with records and waits of their own.
 */

/** The fields of `ProcessIdentity`, for a record's zod schema to spread. */
export const processIdentityShape = {
  pid: z.number().int().positive(),
  host: z.string(),
  startTicks: z.number().int().optional(),
  bootId: z.string().optional(),
};

/** One kind of lock file: where it is, how its record is read, and when two records are one take. */
export interface LockFile<H extends ProcessIdentity> {
  readonly file: string;
  readonly schema: z.ZodType<H>;
  /**
   * Whether two records are the same taking of the lock (its run id and time, its token): what a
   * release or the removal of a stale lock checks, so it never removes a lock taken since.
   */
  readonly sameTake: (a: H, b: H) => boolean;
}

export interface TakeLockOptions<H extends ProcessIdentity> extends LockFile<H> {
  /** This process's record, made afresh for each attempt (its time is when it was taken). */
  record: () => H;
  /**
   * Called each time a live holder (or one on another host) is found, before the next look:
   * throws to stop waiting (a bound, `--no-wait`), returns to wait on.
   */
  whileHeld: (holder: H) => void | Promise<void>;
  /** The error for a file that is not such a record: never removed, cordon cannot tell who holds it. */
  unreadable: () => Error;
  /** The error when `signal` fires while waiting. */
  aborted: (reason: unknown) => Error;
  /** How often a waiter looks at the lock again (ms). */
  pollMs: number;
  signal?: AbortSignal | undefined;
}

/** A held lock file. */
export interface HeldLockFile<H> {
  readonly holder: H;
  readonly file: string;
  /** Removes the lock if it is still this take's; calling it twice is harmless. */
  release(): Promise<void>;
}

/**
 * Takes the lock: made at once when there is none (created whole, with link(2)), waited for
 * (polling) while a live process holds it, taken over when its holder is dead. The lock also goes
 * when this process is made to exit while holding it (a second Ctrl-C skips every `finally`).
 */
export async function takeLockFile<H extends ProcessIdentity>(
  options: TakeLockOptions<H>,
): Promise<HeldLockFile<H>> {
  await mkdir(path.dirname(options.file), { recursive: true, mode: 0o700 });
  for (;;) {
    if (options.signal?.aborted) throw options.aborted(options.signal.reason);
    const record = options.record();
    if (await createExclusive(options.file, recordText(record))) return heldLock(options, record);
    const current = await readLockFile(options.file, options.schema);
    if (current === "missing") continue;
    if (current === "unreadable") throw options.unreadable();
    if (processState(current) === "dead") {
      await breakStaleLock(options, current, record);
      continue;
    }
    await options.whileHeld(current);
    // An abort while asleep is reported by the check at the top, naming what was stopped.
    await sleep(options.pollMs, options.signal).catch(() => undefined);
  }
}

/** A lock file's record: "missing" when there is no file, "unreadable" when cordon did not write it. */
export async function readLockFile<H>(
  file: string,
  schema: z.ZodType<H>,
): Promise<H | "missing" | "unreadable"> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "missing";
    throw error;
  }
  return parseRecord(text, schema);
}

/**
 * Removes a lock whose holder is dead, as taking it over would, without taking it: `"removed"`,
 * `"missing"`, `"unreadable"` (left alone), or the live holder (or one on another host), left
 * alone. For cleaning up after what the lock guarded is gone.
 */
export async function removeStaleLock<H extends ProcessIdentity>(
  lock: LockFile<H>,
  remover: ProcessIdentity,
): Promise<"removed" | "missing" | "unreadable" | H> {
  for (;;) {
    const current = await readLockFile(lock.file, lock.schema);
    if (typeof current === "string") return current;
    if (processState(current) !== "dead") return current;
    await breakStaleLock(lock, current, remover);
    const after = await readLockFile(lock.file, lock.schema);
    if (after === "missing") return "removed";
  }
}

/**
 * Removes the lock of a dead holder. Two processes may find the same dead lock; if both simply
 * deleted it, the slower one could delete the fresh lock the faster one made after it. So removal
 * happens only under a second lock, `<lock>.break` (held for a read and an unlink), after reading
 * the lock again: a lock made since then has a live holder and is left alone. Exported for tests.
 */
export async function breakStaleLock<H extends ProcessIdentity>(
  lock: LockFile<H>,
  dead: H,
  breaker: ProcessIdentity,
): Promise<void> {
  const breakFile = `${lock.file}.break`;
  const breakSchema = z.object(processIdentityShape);
  if (!(await createExclusive(breakFile, recordText(breaker)))) {
    const other = await readLockFile(breakFile, breakSchema);
    // A breaker that died between its two steps leaves its file; it is removed the same careful
    // way (moved aside and checked), and the caller's next pass tries again.
    if (typeof other !== "string" && processState(other) === "dead") {
      await removeIfStill(breakFile, breakSchema, (moved) => sameProcess(moved, other));
    }
    await sleep(10);
    return;
  }
  try {
    const current = await readLockFile(lock.file, lock.schema);
    if (typeof current !== "string" && lock.sameTake(current, dead)) {
      await unlinkIfPresent(lock.file);
    }
  } finally {
    await unlinkIfPresent(breakFile);
  }
}

function heldLock<H extends ProcessIdentity>(lock: LockFile<H>, holder: H): HeldLockFile<H> {
  let released = false;
  const ours = (record: H | string): boolean =>
    typeof record !== "string" && lock.sameTake(record, holder);
  const forget = onProcessExit(() => {
    if (ours(parseRecord(readFileSync(lock.file, "utf8"), lock.schema))) unlinkSync(lock.file);
  });
  return {
    holder,
    file: lock.file,
    async release() {
      if (released) return;
      released = true;
      forget();
      // Never a lock that is no longer this take's: it cannot be taken from a live process, but
      // one deleted and re-made by hand must not be dropped by the holder that ends here.
      if (ours(await readLockFile(lock.file, lock.schema))) await unlinkIfPresent(lock.file);
    },
  };
}

/** Moves `file` aside, and deletes it only if it still holds `expected`; otherwise puts it back. */
async function removeIfStill<H>(
  file: string,
  schema: z.ZodType<H>,
  expected: (moved: H) => boolean,
): Promise<void> {
  const aside = `${file}.${process.pid}.${randomUUID()}.stale`;
  try {
    await rename(file, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  const moved = await readLockFile(aside, schema);
  if (typeof moved === "string" || !expected(moved)) await link(aside, file).catch(() => undefined);
  await unlinkIfPresent(aside);
}

function sameProcess(a: ProcessIdentity, b: ProcessIdentity): boolean {
  return a.pid === b.pid && a.host === b.host && a.startTicks === b.startTicks;
}

/** A lock file's text: its record as one JSON line. */
function recordText(record: unknown): string {
  return `${JSON.stringify(record)}\n`;
}

function parseRecord<H>(text: string, schema: z.ZodType<H>): H | "unreadable" {
  try {
    const parsed = schema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : "unreadable";
  } catch {
    return "unreadable";
  }
}
