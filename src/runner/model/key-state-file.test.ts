import { lstat, mkdtemp, readFile, symlink, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { removeStateDirectory } from "../../../test/support/state-directory.js";
import { keyId } from "./api-keys.js";
import { maxCooldownMs } from "./key-pool.js";
import { fileKeyStateStore, keyStatePath } from "./key-state-file.js";

let home: string;
beforeEach(async () => {
  home = await mkdtemp(path.join(tmpdir(), "cordon-key-state-"));
});
afterEach(async () => {
  await removeStateDirectory(home);
});

const snapshot = (store = fileKeyStateStore(home)) =>
  store.update((usages, now) => ({ usages: structuredClone(usages), now }));

describe("the shared record of API key use", () => {
  it("loses no update when several writers race (read, change and write under one lock)", async () => {
    const ids = Array.from({ length: 12 }, (_, index) => keyId(`sk-${index}`));
    await Promise.all(
      ids.map((id) =>
        fileKeyStateStore(home).update((usages, now) => {
          usages[id] = { lastUsed: now };
        }),
      ),
    );
    const { usages } = await snapshot();
    expect(Object.keys(usages).sort()).toEqual([...ids].sort());
    const stat = await lstat(keyStatePath(home));
    expect(stat.mode & 0o777).toBe(0o600);
  });

  it("reads a file that is not JSON as empty and replaces it", async () => {
    await writeFile(keyStatePath(home), "{ not json at all");
    const id = keyId("sk-a");
    await fileKeyStateStore(home).update((usages) => {
      expect(usages).toEqual({});
      usages[id] = { lastUsed: 1 };
    });
    expect(JSON.parse(await readFile(keyStatePath(home), "utf8"))).toEqual({
      v: 1,
      keys: { [id]: { lastUsed: 1 } },
    });
  });

  it("clamps hostile values: no key locked out for a year, none 'used' in the future", async () => {
    const locked = keyId("sk-locked");
    const future = keyId("sk-future");
    const year = 365 * 24 * 3600 * 1000;
    await writeFile(
      keyStatePath(home),
      JSON.stringify({
        v: 1,
        keys: {
          [locked]: { lastUsed: 0, cooldownUntil: Date.now() + year, failures: 1e9 },
          [future]: { lastUsed: Date.now() + year },
          __proto__: { lastUsed: 1 },
          "not-a-key-id": { lastUsed: 1 },
          [keyId("sk-bad")]: { lastUsed: "yesterday" },
        },
      }),
    );
    const { usages, now } = await snapshot();
    expect(Object.keys(usages).sort()).toEqual([locked, future].sort());
    expect(usages[locked]?.cooldownUntil).toBeLessThanOrEqual(now + maxCooldownMs);
    expect(usages[locked]?.failures).toBe(3);
    expect(usages[future]?.lastUsed).toBeLessThanOrEqual(now);
  });

  it("never follows a link at its place: the target is neither read nor written", async () => {
    const target = path.join(home, "elsewhere.json");
    const planted = JSON.stringify({ v: 1, keys: { [keyId("sk-planted")]: { lastUsed: 7 } } });
    await writeFile(target, planted);
    await symlink(target, keyStatePath(home));
    const { usages } = await snapshot();
    expect(usages).toEqual({});
    expect(await readFile(target, "utf8")).toBe(planted);
    expect((await lstat(keyStatePath(home))).isSymbolicLink()).toBe(false);
  });

  it("takes over a lock left by a process that is gone, and removes one it cannot read", async () => {
    const lock = `${keyStatePath(home)}.lock`;
    await writeFile(
      lock,
      JSON.stringify({
        pid: 999_999_999,
        host: hostname(),
        token: "dead",
      }),
    );
    await snapshot();
    await expect(lstat(lock)).rejects.toThrow();
    await writeFile(lock, "garbage");
    await snapshot();
    await expect(lstat(lock)).rejects.toThrow();
  });
});
