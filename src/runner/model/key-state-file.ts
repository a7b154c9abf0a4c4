import { randomUUID } from "node:crypto";
import { constants } from "node:fs";
import { mkdir, open, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";

import { z } from "zod";

import {
  createExclusive,
  currentProcessIdentity,
  processState,
  sleep,
  type Logger,
  type ProcessIdentity,
  unlinkIfPresent,
} from "../../common/index.js";
import { cooldownStepsMs, maxCooldownMs, type KeyUsage, type KeyUsages } from "./key-pool.js";

/**
 * Where the keys' use is recorded, so every process of the user takes turns with the others and
 * respects their cooldowns. `update` reads, changes and writes the record as one step.
 */
export interface KeyStateStore {
  update<T>(change: (usages: KeyUsages, now: number) => T): Promise<T>;
}

/** A store for one process (an embedder without a state directory, tests). */
export function memoryKeyStateStore(now: () => number = Date.now): KeyStateStore {
  const usages: KeyUsages = {};
  return { update: (change) => Promise.resolve(change(usages, now())) };
}

/** The file, in CORDON_HOME. */
export function keyStatePath(stateDir: string): string {
  return path.join(stateDir, "model-keys.json");
}

/** Largest state file read; anything bigger was not written by cordon and is started over. */
const maxStateBytes = 64 * 1024;
/** Keys remembered; the least recently used beyond this are forgotten. */
const maxEntries = 100;
/** How long a process waits for another's lock (held for a read and a write) before going on. */
const lockWaitMs = 2_000;
const lockPollMs = 10;

const usageSchema = z.object({
  lastUsed: z.number().finite().optional(),
  cooldownUntil: z.number().finite().optional(),
  failures: z.number().int().optional(),
});
const idPattern = /^[0-9a-f]{12}$/;

/**
 * The shared record, `<CORDON_HOME>/model-keys.json`: `{"v":1,"keys":{"<id>":{lastUsed,
 * cooldownUntil, failures}}}` by each key's short hash, never the key. Written whole to a
 * temporary file and renamed into place, so it is never seen half-written, under a lock file
 * (`.lock`, created with link(2) so it is never seen empty) that is held for milliseconds.
 *
 * The record is advisory: what goes wrong with it may make two processes pick the same key, never
 * end or stall a run. A lock whose process died is taken over; one still held after two seconds
 * is waited out no longer. A file that is not valid JSON, too large, a symbolic link (never
 * followed) or from a hostile hand is read as empty or with its values clamped (no future
 * `lastUsed`, no cooldown beyond 300 s), and is replaced by the next write; its contents never
 * reach a message or a log.
 *
 * Not the session lock (session-lock.ts): that one is held for a whole run and must never be
 * stolen from a live process; this one guards a few milliseconds of work.
 */
export function fileKeyStateStore(stateDir: string, logger?: Logger): KeyStateStore {
  const file = keyStatePath(stateDir);
  return {
    async update(change) {
      await mkdir(stateDir, { recursive: true, mode: 0o700 });
      const lock = await takeLock(`${file}.lock`, logger);
      try {
        const now = Date.now();
        const usages = await readUsages(file, now);
        const result = change(usages, now);
        await writeUsages(file, usages);
        return result;
      } finally {
        await lock.release();
      }
    },
  };
}

async function readUsages(file: string, now: number): Promise<KeyUsages> {
  let text: string;
  try {
    const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      const buffer = Buffer.alloc(maxStateBytes + 1);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      if (bytesRead > maxStateBytes) return {};
      text = buffer.subarray(0, bytesRead).toString("utf8");
    } finally {
      await handle.close();
    }
  } catch {
    // Missing (the first run), a link, a directory, unreadable: start over.
    return {};
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return {};
  }
  return sanitize(parsed, now);
}

/** Keeps the well-formed entries of a parsed file, their values clamped to what cordon writes. */
function sanitize(parsed: unknown, now: number): KeyUsages {
  const usages: KeyUsages = Object.create(null) as KeyUsages;
  if (typeof parsed !== "object" || parsed === null) return usages;
  const keys = (parsed as { keys?: unknown }).keys;
  if (typeof keys !== "object" || keys === null) return usages;
  for (const [id, value] of Object.entries(keys)) {
    if (!idPattern.test(id)) continue;
    const entry = usageSchema.safeParse(value);
    if (!entry.success) continue;
    const usage: KeyUsage = {};
    const { lastUsed, cooldownUntil, failures } = entry.data;
    if (lastUsed !== undefined) usage.lastUsed = Math.min(lastUsed, now);
    if (cooldownUntil !== undefined && cooldownUntil > now) {
      usage.cooldownUntil = Math.min(cooldownUntil, now + maxCooldownMs);
    }
    if (failures !== undefined && failures > 0) {
      usage.failures = Math.min(failures, cooldownStepsMs.length);
    }
    usages[id] = usage;
  }
  return usages;
}

async function writeUsages(file: string, usages: KeyUsages): Promise<void> {
  const kept = Object.entries(usages)
    .sort(([, a], [, b]) => (b.lastUsed ?? 0) - (a.lastUsed ?? 0))
    .slice(0, maxEntries);
  const temporary = `${file}.${process.pid}.${randomUUID()}.tmp`;
  try {
    await writeFile(
      temporary,
      `${JSON.stringify({ v: 1, keys: Object.fromEntries(kept) }, null, 1)}\n`,
      { mode: 0o600, flag: "wx" },
    );
    // rename replaces a link at `file` itself, never what it points to.
    await rename(temporary, file);
  } finally {
    await unlinkIfPresent(temporary);
  }
}

interface HeldLock {
  release(): Promise<void>;
}

const lockHolderSchema = z.object({
  pid: z.number().int().positive(),
  host: z.string(),
  startTicks: z.number().int().optional(),
  bootId: z.string().optional(),
  token: z.string(),
});

async function takeLock(file: string, logger: Logger | undefined): Promise<HeldLock> {
  const holder = { ...currentProcessIdentity(), token: randomUUID() };
  const deadline = Date.now() + lockWaitMs;
  for (;;) {
    if (await createExclusive(file, JSON.stringify(holder))) {
      return {
        release: async () => {
          // Only our own: a lock taken over from us (we stalled past the wait) is not ours to drop.
          const current = await readHolder(file);
          if (typeof current !== "string" && current.token === holder.token) {
            await unlinkIfPresent(file);
          }
        },
      };
    }
    const current = await readHolder(file);
    if (current === "missing") continue;
    // Rare (a crash, a hand-made file): two takers may both remove it and one of them the other's
    // fresh lock, which costs at most one shared pick; a live holder's lock is never removed.
    if (current === "unreadable" || processState(current) === "dead") {
      await unlinkIfPresent(file);
      continue;
    }
    if (Date.now() >= deadline) {
      logger?.debug({ lock: file }, "the model key state lock is still held; going on without it");
      return { release: () => Promise.resolve() };
    }
    await sleep(lockPollMs);
  }
}

/** The lock's holder: "missing" when there is no lock, "unreadable" when cordon did not write it. */
async function readHolder(
  file: string,
): Promise<(ProcessIdentity & { token: string }) | "missing" | "unreadable"> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT" ? "missing" : "unreadable";
  }
  try {
    const parsed = lockHolderSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : "unreadable";
  } catch {
    return "unreadable";
  }
}
