import { randomUUID } from "node:crypto";
import { link, mkdir, readFile, rename } from "node:fs/promises";
import path from "node:path";

import { z } from "zod";

import {
  SandboxError,
  createExclusive,
  currentProcessIdentity,
  processState,
  sleep,
  throwIfAborted,
  unlinkIfPresent,
} from "../../common/index.js";
import { recordsDirectory } from "./records.js";

/**
 * Who froze a sandbox: `<stateDir>/sandboxes/<container>.frozen` exists while one cordon command
 * (a rollback, a diff, a checkpoint, a fork's parent) has it paused, written before the pause and
 * removed after the resume. Docker's paused state alone cannot tell a freeze that is under way
 * from one a crashed command left behind, so a run of another session sharing the sandbox used to
 * resume it in the middle of a rollback; with the marker it waits while the holder lives, and
 * resumes the sandbox only once the holder is gone (a stale marker, see `processState`).
 *
 * The marker is also the lock of freezing: two commands freezing one sandbox take turns.
 */
const holderSchema = z.object({
  v: z.literal(1),
  pid: z.number().int().positive(),
  host: z.string(),
  startTicks: z.number().int().optional(),
  bootId: z.string().optional(),
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

const safeName = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** `<stateDir>/sandboxes/<containerName>.frozen`. */
export function freezeMarkerFile(stateDirectory: string, containerName: string): string {
  if (!safeName.test(containerName)) throw new Error(`invalid container name ${containerName}`);
  return path.join(recordsDirectory(stateDirectory), `${containerName}.frozen`);
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
  const holder: FreezeHolder = {
    v: 1,
    ...currentProcessIdentity(),
    token: randomUUID(),
    command: commandLine(),
    since: new Date().toISOString(),
  };
  await takeMarker(file, holder, containerName, options);
  try {
    return await fn();
  } finally {
    await releaseMarker(file, holder.token);
  }
}

/** The holder of a sandbox's freeze marker, or undefined when there is none (or it is unreadable). */
export async function readFreezeMarker(
  stateDirectory: string,
  containerName: string,
): Promise<FreezeHolder | undefined> {
  const read = await readHolder(freezeMarkerFile(stateDirectory, containerName));
  return typeof read === "string" ? undefined : read;
}

/** How a holder is named in messages: `cordon rollback (pid 4242 on box, since …)`. */
export function describeFreezeHolder(holder: FreezeHolder): string {
  return `${holder.command} (pid ${holder.pid} on ${holder.host}, since ${holder.since})`;
}

async function takeMarker(
  file: string,
  holder: FreezeHolder,
  containerName: string,
  options: FreezeWaitOptions,
): Promise<void> {
  const boundMs = options.boundMs ?? defaultBoundMs;
  const announceAfterMs = options.announceAfterMs ?? 1000;
  const pollMs = options.pollMs ?? 100;
  const started = Date.now();
  let announced: string | undefined;
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  for (;;) {
    throwIfAborted(options.signal, `waiting for the freeze of ${containerName}`);
    holder.since = new Date().toISOString();
    if (await createExclusive(file, `${JSON.stringify(holder)}\n`)) return;
    const current = await readHolder(file);
    if (current === "missing") continue;
    if (current === "unreadable") {
      throw new SandboxError(
        `the freeze marker of ${containerName} (${file}) cannot be read, so cordon cannot tell whether a command has the sandbox paused`,
        { fix: `if no cordon command uses ${containerName} now, delete ${file}` },
      );
    }
    // Dead (gone, or its pid reused since): it can resume nothing, so its marker is taken over.
    // A holder on another host ("unknown") is waited for, as a live one.
    if (processState(current) === "dead") {
      await removeIfStill(file, current.token);
      continue;
    }
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
    // An abort while asleep is reported by the check at the top, naming what was stopped.
    await sleep(pollMs, options.signal).catch(() => undefined);
  }
}

/** Removes the marker if it is still the one made with `token`. */
async function releaseMarker(file: string, token: string): Promise<void> {
  const current = await readHolder(file);
  if (typeof current !== "string" && current.token === token) await removeIfStill(file, token);
}

/**
 * Moves `file` aside and deletes it only if it still holds `token`; otherwise puts it back. Two
 * processes that found the same dead holder must not have the slower one delete the marker the
 * faster one made meanwhile: the rename is atomic, so exactly one moves any given marker, and a
 * live one moved by mistake is linked back.
 */
async function removeIfStill(file: string, token: string): Promise<void> {
  const aside = `${file}.${process.pid}.${randomUUID()}.stale`;
  try {
    await rename(file, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  const moved = await readHolder(aside);
  if (typeof moved === "string" || moved.token !== token) {
    await link(aside, file).catch(() => undefined);
  }
  await unlinkIfPresent(aside);
}

async function readHolder(file: string): Promise<FreezeHolder | "missing" | "unreadable"> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "missing";
    throw error;
  }
  try {
    const parsed = holderSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : "unreadable";
  } catch {
    return "unreadable";
  }
}

/** `cordon rollback`: the program and its first argument, which for the CLI is the command. */
function commandLine(): string {
  const [, script, first] = process.argv;
  const program = script ? path.basename(script).replace(/\.[cm]?js$/, "") : "node";
  const name = program === "index" || program === "main" ? "cordon" : program;
  return first && !first.startsWith("-") ? `${name} ${first}` : name;
}
