import { spawnSync } from "node:child_process";
import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";

import { currentProcessIdentity, type ProcessIdentity } from "./process-identity.js";
import {
  processIdentityShape,
  readLockFile,
  removeStaleLock,
  takeLockFile,
  type LockFile,
} from "./process-lock.js";

const schema = z.object({ ...processIdentityShape, token: z.string() });
type Holder = z.infer<typeof schema>;

/** The identity of a process that has exited, with a start time no process of its pid has. */
function deadIdentity(): ProcessIdentity {
  const exited = spawnSync(process.execPath, ["-e", ""]);
  return { pid: exited.pid ?? 999_999, host: hostname(), startTicks: 1 };
}

describe("a lock file held by a live process", () => {
  let folder: string;
  let lock: LockFile<Holder>;
  beforeEach(async () => {
    folder = await mkdtemp(path.join(tmpdir(), "cordon-process-lock-"));
    lock = { file: path.join(folder, "x.lock"), schema, sameTake: (a, b) => a.token === b.token };
  });
  afterEach(async () => {
    await rm(folder, { recursive: true, force: true });
  });

  const take = (token: string) =>
    takeLockFile({
      ...lock,
      record: () => ({ ...currentProcessIdentity(), token }),
      whileHeld: () => undefined,
      unreadable: () => new Error("unreadable"),
      aborted: () => new Error("aborted"),
      pollMs: 2,
    });

  it("racing takers of a dead holder's lock hold it one at a time", async () => {
    await writeFile(lock.file, JSON.stringify({ ...deadIdentity(), token: "dead" }));
    let inside = 0;
    let most = 0;
    await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const held = await take(`racer-${i}`);
        inside += 1;
        most = Math.max(most, inside);
        await new Promise((resolve) => setImmediate(resolve));
        inside -= 1;
        await held.release();
      }),
    );
    expect(most).toBe(1);
    expect(await readdir(folder)).toEqual([]);
  });

  it("removing a stale lock takes a dead holder's and leaves a live or unreadable one", async () => {
    expect(await removeStaleLock(lock, currentProcessIdentity())).toBe("missing");

    await writeFile(lock.file, JSON.stringify({ ...deadIdentity(), token: "dead" }));
    expect(await removeStaleLock(lock, currentProcessIdentity())).toBe("removed");
    expect(await readdir(folder)).toEqual([]);

    const held = await take("live");
    expect(await removeStaleLock(lock, currentProcessIdentity())).toMatchObject({ token: "live" });
    expect(await readLockFile(lock.file, schema)).toMatchObject({ token: "live" });
    await held.release();

    const elsewhere = { ...deadIdentity(), host: `not-${hostname()}`, token: "remote" };
    await writeFile(lock.file, JSON.stringify(elsewhere));
    expect(await removeStaleLock(lock, currentProcessIdentity())).toMatchObject(elsewhere);

    await writeFile(lock.file, "not json");
    expect(await removeStaleLock(lock, currentProcessIdentity())).toBe("unreadable");
    expect(await readFile(lock.file, "utf8")).toBe("not json");
  });
});
