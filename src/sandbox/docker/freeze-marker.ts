import { randomUUID } from "node:crypto";
import { readdir } from "node:fs/promises";
import path from "node:path";

import { z } from "zod";

import { AbortedError, SandboxError, currentProcessIdentity } from "../../common/index.js";
import {
  processIdentityShape,
  readLockFile,
  removeStaleLock,
  takeLockFile,
  type LockFile,
} from "../../common/process-lock.js";
import { recordsDirectory } from "./records.js";

/**
 * Who froze a sandbox: `<stateDir>/sandboxes/<container>.frozen` exists while one cordon command
 * (a rollback, a diff, a checkpoint, a fork's parent) has it paused, written before the pause and
 * removed after the resume. Docker's paused state alone cannot tell a freeze that is under way
 * from one a crashed command left behind, so a run of another session sharing the sandbox used to
 * resume it in the middle of a rollback; with the marker it waits while the holder lives, and
 * resumes the sandbox only once the holder is gone (a stale marker, see `processState`).
 *
 * The marker is also the lock of freezing: two commands freezing one sandbox take turns. It is a
 * lock file held by a live process (common/process-lock.ts), its take named by a token.
 */
const holderSchema = z.object({
  v: z.literal(1),
  ...processIdentityShape,
  /** This freeze, so a release or a stale break removes only the marker it read. */
  token: z.string(),
  /** What froze it, for the messages of whoever waits: `cordon rollback`. */
  command: z.string(),
  /** ISO 8601 time the marker was made. */
  since: z.string(),
});
export type FreezeHolder = z.infer<typeof holderSchema>;

export interface FreezeWaitOptions {
  signal?: AbortSignal | undefined;
  /** Called once the wait has lasted `announceAfterMs`, and again when the holder changes. */
  onWait?: ((message: string) => void) | undefined;
  /** How long a live holder is waited for before giving up (ms, default 10 minutes). */
  boundMs?: number | undefined;
  /** Default 1 s: a diff's freeze is over sooner, and saying nothing about it is right. */
  announceAfterMs?: number | undefined;
  /** How often the marker is looked at again (ms, default 100). */
  pollMs?: number | undefined;
}

/** Long enough for a rollback or fork of a large copy; a holder stuck for longer is named. */
const defaultBoundMs = 10 * 60_000;

const markerSuffix = ".frozen";

const safeName = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** `<stateDir>/sandboxes/<containerName>.frozen`. */
export function freezeMarkerFile(stateDirectory: string, containerName: string): string {
  if (!safeName.test(containerName)) throw new Error(`invalid container name ${containerName}`);
  return path.join(recordsDirectory(stateDirectory), `${containerName}${markerSuffix}`);
}

/**
 * Runs `fn` holding the freeze marker of `containerName`: made at once when there is none, waited
 * for while a live process holds it (up to `boundMs`, then a `SandboxError` naming that process),
 * taken over when its holder is dead. Removed after `fn`, whatever `fn` did. `fn` may pause the
 * container, and must resume it before it returns: nothing else resumes it meanwhile.
 */
export async function holdFreezeMarker<T>(
  stateDirectory: string,
  containerName: string,
  fn: () => Promise<T>,
  options: FreezeWaitOptions = {},
): Promise<T> {
  const file = freezeMarkerFile(stateDirectory, containerName);
  const identity = { v: 1 as const, ...currentProcessIdentity(), command: commandLine() };
  const boundMs = options.boundMs ?? defaultBoundMs;
  const announceAfterMs = options.announceAfterMs ?? 1000;
  const started = Date.now();
  let announced: string | undefined;
  const held = await takeLockFile({
    ...freezeMarkerLock(file),
    record: () => ({ ...identity, token: randomUUID(), since: new Date().toISOString() }),
    pollMs: options.pollMs ?? 100,
    signal: options.signal,
    aborted: (reason) =>
      new AbortedError(`waiting for the freeze of ${containerName} was aborted`, { cause: reason }),
    unreadable: () =>
      new SandboxError(
        `the freeze marker of ${containerName} (${file}) cannot be read, so cordon cannot tell whether a command has the sandbox paused`,
        { fix: `if no cordon command uses ${containerName} now, delete ${file}` },
      ),
    // A holder on another host is waited for, as a live one.
    whileHeld: (current) => {
      const waited = Date.now() - started;
      if (waited >= boundMs) {
        throw new SandboxError(
          `${containerName} has been frozen by ${describeFreezeHolder(current)} for longer than cordon waits (${Math.round(boundMs / 1000)} s)`,
          {
            fix: `if that command is stuck, stop it (kill ${current.pid}); the next cordon command resumes the sandbox once it is gone`,
          },
        );
      }
      if (waited >= announceAfterMs && announced !== current.token) {
        announced = current.token;
        options.onWait?.(
          `waiting for ${describeFreezeHolder(current)}, which has ${containerName} frozen to read or write its copy`,
        );
      }
    },
  });
  try {
    return await fn();
  } finally {
    await held.release();
  }
}

/** The freeze marker as a lock file held by a live process: one take is one token. */
function freezeMarkerLock(file: string): LockFile<FreezeHolder> {
  return { file, schema: holderSchema, sameTake: (a, b) => a.token === b.token };
}

/** The holder of a sandbox's freeze marker, or undefined when there is none (or it is unreadable). */
export async function readFreezeMarker(
  stateDirectory: string,
  containerName: string,
): Promise<FreezeHolder | undefined> {
  const read = await readLockFile(freezeMarkerFile(stateDirectory, containerName), holderSchema);
  return typeof read === "string" ? undefined : read;
}

/**
 * Removes the freeze marker of a sandbox that is gone, if its holder is dead: `"removed"`,
 * `"missing"`, `"unreadable"` or the live holder (both left alone: a live one removes its own).
 */
export function removeStaleFreezeMarker(
  stateDirectory: string,
  containerName: string,
): Promise<"removed" | "missing" | "unreadable" | FreezeHolder> {
  const file = freezeMarkerFile(stateDirectory, containerName);
  return removeStaleLock(freezeMarkerLock(file), currentProcessIdentity());
}

/** The names of the sandboxes with a freeze marker, live or stale. */
export async function frozenSandboxNames(stateDirectory: string): Promise<string[]> {
  const names = await readdir(recordsDirectory(stateDirectory)).catch(() => []);
  return names
    .filter((name) => name.endsWith(markerSuffix))
    .map((name) => name.slice(0, -markerSuffix.length))
    .filter((name) => safeName.test(name));
}

/** How a holder is named in messages: `cordon rollback (pid 4242 on box, since …)`. */
export function describeFreezeHolder(holder: FreezeHolder): string {
  return `${holder.command} (pid ${holder.pid} on ${holder.host}, since ${holder.since})`;
}

/** `cordon rollback`: the program and its first argument, which for the CLI is the command. */
function commandLine(): string {
  const [, script, first] = process.argv;
  const program = script ? path.basename(script).replace(/\.[cm]?js$/, "") : "node";
  const name = program === "index" || program === "main" ? "cordon" : program;
  return first && !first.startsWith("-") ? `${name} ${first}` : name;
}
