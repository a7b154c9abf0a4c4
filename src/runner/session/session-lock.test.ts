import { spawnSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { AbortedError, currentProcessIdentity, exitCodeOf } from "../../common/index.js";
import { breakStaleLock } from "../../common/process-lock.js";
import {
  SessionBusyError,
  SessionLockError,
  acquireSessionLock,
  readSessionLock,
  sessionLockFile,
  waitingFile,
  type SessionLockHolder,
} from "./session-lock.js";
import { listWaitingRuns } from "./active-runs.js";
import { sessionFiles } from "./session-name.js";

const sessionKey = "agent:main:lock-test";

describe("the session lock", () => {
  let stateDir: string;
  let lockFile: string;

  beforeEach(async () => {
    stateDir = await mkdtemp(path.join(tmpdir(), "cordon-session-lock-"));
    lockFile = sessionFiles(stateDir, sessionKey).lock;
  });
  afterEach(async () => {
    await rm(stateDir, { recursive: true, force: true });
  });

  const acquire = (
    runId: string,
    extra: { wait?: boolean; onWait?: (h: SessionLockHolder) => void } = {},
  ) => acquireSessionLock({ stateDir, sessionKey, runId, pollMs: 10, ...extra });

  /** A lock file as another process would have left it. */
  async function leaveLock(identity: Partial<SessionLockHolder>): Promise<void> {
    await mkdir(path.dirname(lockFile), { recursive: true });
    const record: SessionLockHolder = {
      v: 1,
      ...currentProcessIdentity(),
      runId: "run-left-behind",
      sessionKey,
      since: "2026-01-01T00:00:00.000Z",
      ...identity,
    };
    await writeFile(lockFile, JSON.stringify(record));
  }

  /** The pid of a process that has exited (and been reaped). */
  function deadPid(): number {
    const child = spawnSync(process.execPath, ["-e", "console.log(process.pid)"], {
      encoding: "utf8",
    });
    return Number(child.stdout.trim());
  }

  it("records who holds it, and a second run waits, naming the holder, until it is released", async () => {
    const first = await acquire("run-1");
    expect(await readSessionLock(lockFile)).toMatchObject({
      pid: process.pid,
      host: hostname(),
      runId: "run-1",
      sessionKey,
    });
    const waitedFor: SessionLockHolder[] = [];
    let secondHeld = false;
    const second = acquire("run-2", { onWait: (holder) => waitedFor.push(holder) }).then((lock) => {
      secondHeld = true;
      return lock;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(secondHeld).toBe(false);
    expect(waitedFor).toEqual([expect.objectContaining({ pid: process.pid, runId: "run-1" })]);
    expect(waitedFor[0]?.since).toBe(first.holder.since);

    await first.release();
    const lock = await second;
    expect(lock.holder.runId).toBe("run-2");
    expect((await readSessionLock(lockFile))?.runId).toBe("run-2");
    await lock.release();
    expect(await readSessionLock(lockFile)).toBeUndefined();
  });

  it("a waiting run is listed as waiting for the lock until it holds it; a dead waiter's file is not", async () => {
    const first = await acquire("run-1");
    // A waiter killed while it waited left its file behind.
    const deadWaiter = waitingFile(lockFile, { pid: deadPid(), runId: "run-killed" });
    await writeFile(
      deadWaiter,
      JSON.stringify({ ...first.holder, pid: deadPid(), runId: "run-killed", startTicks: 1 }),
    );
    let announce: () => void = () => undefined;
    const announced = new Promise<void>((resolve) => (announce = resolve));
    const second = acquire("run-2", { onWait: () => announce() });
    await announced;

    expect(await listWaitingRuns({ stateDir })).toEqual([
      {
        waiter: expect.objectContaining({
          runId: "run-2",
          pid: process.pid,
          sessionKey,
        }) as unknown,
        lockFile,
      },
    ]);
    await first.release();
    const lock = await second;
    expect(await listWaitingRuns({ stateDir })).toEqual([]);
    await expect(readFile(waitingFile(lockFile, lock.holder), "utf8")).rejects.toThrow(/ENOENT/);
    await lock.release();
  });

  it("a run that stops waiting (aborted) leaves no waiting file", async () => {
    const first = await acquire("run-1");
    const controller = new AbortController();
    const second = acquireSessionLock({
      stateDir,
      sessionKey,
      runId: "run-2",
      pollMs: 10,
      signal: controller.signal,
      onWait: () => controller.abort(),
    });
    await expect(second).rejects.toThrow();
    expect(await listWaitingRuns({ stateDir })).toEqual([]);
    await first.release();
  });

  it("without waiting, a held session is an error with exit code 3 that names the session and the holder", async () => {
    const first = await acquire("run-1");
    const error = await acquire("run-2", { wait: false }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SessionBusyError);
    expect(exitCodeOf(error)).toBe(3);
    expect((error as Error).message).toContain(sessionKey);
    expect((error as Error).message).toContain(`pid ${process.pid}`);
    expect((error as SessionBusyError).fix).toContain(`cordon logs -f --session ${sessionKey}`);
    await first.release();
  });

  it("takes over the lock of a process that is gone", async () => {
    await leaveLock({ pid: deadPid() });
    const lock = await acquire("run-new", { wait: false });
    expect((await readSessionLock(lockFile))?.runId).toBe("run-new");
    await lock.release();
  });

  it("takes over a lock whose pid now belongs to another process (started at another time)", async () => {
    const me = currentProcessIdentity();
    // Our own pid is alive; only the start time says the record is of an earlier process.
    await leaveLock({ pid: me.pid, startTicks: (me.startTicks ?? 0) + 1 });
    const lock = await acquire("run-new", { wait: false });
    expect(lock.holder.runId).toBe("run-new");
    await lock.release();
  });

  it("takes over a lock left before a reboot", async () => {
    await leaveLock({ bootId: "00000000-0000-0000-0000-000000000000" });
    const lock = await acquire("run-new", { wait: false });
    expect(lock.holder.runId).toBe("run-new");
    await lock.release();
  });

  it("does not take a lock of a live process, nor one held on another host", async () => {
    await leaveLock({});
    await expect(acquire("run-new", { wait: false })).rejects.toBeInstanceOf(SessionBusyError);
    await leaveLock({ host: `not-${hostname()}`, pid: deadPid() });
    await expect(acquire("run-new", { wait: false })).rejects.toBeInstanceOf(SessionBusyError);
  });

  it("racing takers of one stale lock: exactly one gets it", async () => {
    const gone = deadPid();
    for (let round = 0; round < 10; round++) {
      await leaveLock({ pid: gone });
      const attempts = await Promise.allSettled(
        Array.from({ length: 8 }, (_, i) => acquire(`racer-${round}-${i}`, { wait: false })),
      );
      const winners = attempts.filter((a) => a.status === "fulfilled");
      expect(winners).toHaveLength(1);
      const holder = await readSessionLock(lockFile);
      const winner = winners[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof acquire>>>;
      expect(holder?.runId).toBe(winner.value.holder.runId);
      for (const loser of attempts.filter((a) => a.status === "rejected")) {
        expect(loser.reason).toBeInstanceOf(SessionBusyError);
      }
      await winner.value.release();
    }
  });

  it("a taker that judged a lock stale never removes the fresh lock another taker made since", async () => {
    await leaveLock({ pid: deadPid(), runId: "dead-run" });
    const dead = await readSessionLock(lockFile);
    // Between this taker's read and its removal, another one took the lock over.
    await rm(lockFile);
    const fresh = await acquire("fresh-run", { wait: false });
    await breakStaleLock(sessionLockFile(lockFile), dead as SessionLockHolder, fresh.holder);
    expect((await readSessionLock(lockFile))?.runId).toBe("fresh-run");
    await fresh.release();
  });

  it("an unreadable lock file is an error that names the file, never taken silently", async () => {
    await mkdir(path.dirname(lockFile), { recursive: true });
    await writeFile(lockFile, "not a lock");
    const error = await acquire("run-new").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SessionLockError);
    expect((error as SessionLockError).fix).toContain(lockFile);
    expect(await readFile(lockFile, "utf8")).toBe("not a lock");
  });

  it("release leaves alone a lock that is no longer this run's", async () => {
    const lock = await acquire("run-1");
    await leaveLock({ runId: "someone-else" });
    await lock.release();
    expect((await readSessionLock(lockFile))?.runId).toBe("someone-else");
  });

  it("a waiting run gives up when its signal fires, naming what it stopped, its wait file gone", async () => {
    const first = await acquire("run-1");
    const controller = new AbortController();
    let waited = false;
    const waiting = acquireSessionLock({
      stateDir,
      sessionKey,
      runId: "run-2",
      pollMs: 10,
      signal: controller.signal,
      onWait: () => (waited = true),
    });
    await vi.waitFor(() => expect(waited).toBe(true));
    controller.abort();
    const error = await waiting.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AbortedError);
    expect((error as Error).message).toMatch(
      new RegExp(`^stopped waiting for session ${sessionKey}, held by pid ${process.pid} on `),
    );
    const left = await readdir(path.dirname(first.path));
    expect(left.filter((name) => name.includes(".wait."))).toEqual([]);
    await first.release();
  });
});
