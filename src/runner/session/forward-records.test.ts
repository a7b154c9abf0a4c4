import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { currentProcessIdentity } from "../../common/index.js";
import { describeForward, liveForwards, recordForward } from "./forward-records.js";
import { sandboxesHeld, sandboxesHeldByRuns } from "./held-sandboxes.js";

describe("forward records", () => {
  let stateDir: string;
  const forward = {
    sandbox: "cordon-app-1",
    address: "127.0.0.1",
    localPort: 8080,
    remotePort: 3000,
  };

  beforeEach(async () => {
    stateDir = await mkdtemp(path.join(tmpdir(), "cordon-forwards-"));
  });
  afterEach(async () => {
    await rm(stateDir, { recursive: true, force: true });
  });

  it("shows a forward while it is recorded, and holds its sandbox for stops but not rollbacks", async () => {
    const forget = await recordForward(stateDir, forward);
    const [live] = await liveForwards(stateDir);
    expect(live).toMatchObject({ ...forward, holder: { pid: process.pid } });
    expect(describeForward(live!)).toBe(`127.0.0.1:8080 -> 3000 (pid ${process.pid})`);
    const sandbox = { name: forward.sandbox, session: "agent:main:main" };
    expect((await sandboxesHeld(stateDir)).holderOf(sandbox)).toBe(
      `held by cordon port-forward 127.0.0.1:8080 -> 3000 (pid ${process.pid})`,
    );
    expect((await sandboxesHeldByRuns(stateDir)).holderOf(sandbox)).toBeUndefined();
    expect((await sandboxesHeld(stateDir)).holderOf({ ...sandbox, name: "other" })).toBeUndefined();

    await forget();
    expect(await liveForwards(stateDir)).toEqual([]);
  });

  it("drops and deletes the record of a process that has ended, and skips an unreadable one", async () => {
    await recordForward(stateDir, forward);
    const directory = path.join(stateDir, "forwards");
    const [name] = await readdir(directory);
    // The same record, written by a process that no longer runs (its start time differs).
    const identity = currentProcessIdentity();
    const ended = {
      ...forward,
      startedAt: new Date().toISOString(),
      holder: { ...identity, startTicks: (identity.startTicks ?? 0) + 1, bootId: identity.bootId },
    };
    await writeFile(path.join(directory, name!), JSON.stringify(ended));
    await writeFile(path.join(directory, "1-127.0.0.1-9.json"), "{ torn");
    expect(await liveForwards(stateDir)).toEqual([]);
    expect(await readdir(directory)).toEqual(["1-127.0.0.1-9.json"]);
  });

  it("brackets an IPv6 address", () => {
    const holder = currentProcessIdentity();
    expect(describeForward({ ...forward, address: "::1", startedAt: "", holder })).toBe(
      `[::1]:8080 -> 3000 (pid ${process.pid})`,
    );
  });
});
