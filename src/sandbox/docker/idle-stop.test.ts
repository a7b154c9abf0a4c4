import { writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { exitedState } from "./client/testing/fake-container-client.js";
import { fakeEngine } from "./client/testing/fake-engine.js";
import { labelKeys } from "./container-options.js";
import { egressLabels } from "./egress/egress-proxies.js";
import { stopIdleSandboxes, type IdleStopOptions } from "./idle-stop.js";
import { SandboxRecords, recordsDirectory, type SandboxRecord } from "./records.js";

const now = new Date("2026-06-01T12:00:00.000Z");
const idleMs = 60_000;
const longAgo = new Date(now.getTime() - 10 * idleMs).toISOString();
const justNow = new Date(now.getTime() - 1_000).toISOString();

describe("stopIdleSandboxes", () => {
  let home: string;
  let fake: ReturnType<typeof fakeEngine>;

  beforeEach(async () => {
    home = await mkdtemp(path.join(tmpdir(), "cordon-idle-stop-"));
    fake = fakeEngine();
  });
  afterEach(() => rm(home, { recursive: true, force: true }));

  const record = (name: string, lastUsedAt: string): SandboxRecord => ({
    version: 1,
    containerName: name,
    containerId: name,
    scopeKey: `session:${name}`,
    configHash: "h",
    wantedConfigHash: "h",
    createdAt: longAgo,
    lastUsedAt,
  });

  /** A running sandbox of `home` (or of `stateDirectory`) last used at `lastUsedAt`. */
  async function sandbox(
    name: string,
    lastUsedAt: string,
    options: { processes?: string[]; stateDirectory?: string } = {},
  ) {
    await new SandboxRecords(home).write(record(name, lastUsedAt));
    return fake.containers.add({
      name,
      labels: {
        [labelKeys.managed]: "true",
        [labelKeys.home]: options.stateDirectory ?? home,
        [labelKeys.session]: `agent:test:${name}`,
        [labelKeys.createdAt]: longAgo,
      },
      processes: options.processes,
    });
  }

  const stop = (extra: Partial<IdleStopOptions>) =>
    stopIdleSandboxes({ engine: fake.engine, stateDirectory: home, idleMs, now, ...extra });

  it("stops an idle sandbox and its egress proxy, keeps its record and marks when", async () => {
    const idle = await sandbox("idle", longAgo);
    const proxy = fake.containers.add({
      name: "idle-egress",
      labels: { [egressLabels.sandbox]: "idle", [egressLabels.home]: home },
    });
    const report = await stop({});
    expect(report.stopped).toEqual([{ name: "idle", lastUsedAt: longAgo }]);
    expect(idle.state).toMatchObject({ running: false, exitCode: 143 });
    expect(proxy.state.running).toBe(false);
    // Stopped, never removed: the next acquire starts it again in place.
    expect(fake.containers.find("idle")).toBeDefined();
    expect((await new SandboxRecords(home).read("idle"))?.idleStoppedAt).toBe(now.toISOString());
  });

  it("leaves alone what was used lately, what this process holds, and other state directories", async () => {
    const recent = await sandbox("recent", justNow);
    const held = await sandbox("held", longAgo);
    const elsewhere = await sandbox("elsewhere", longAgo, { stateDirectory: "/other/home" });
    const report = await stop({ keep: new Set(["held"]) });
    expect(report).toEqual({ stopped: [], skipped: [] });
    for (const container of [recent, held, elsewhere]) expect(container.state.running).toBe(true);
  });

  it("skips, with the reason, a sandbox a live run holds and one that runs commands", async () => {
    const live = await sandbox("live", longAgo);
    const busy = await sandbox("busy", longAgo, {
      processes: ["/sbin/docker-init -- sleep infinity", "sleep infinity", "npm run dev"],
    });
    const report = await stop({
      holders: ({ name, session }) =>
        name === "live" ? `the run holding session ${session}` : undefined,
    });
    expect(report.stopped).toEqual([]);
    expect(report.skipped).toEqual([
      { name: "live", reason: "the run holding session agent:test:live" },
      { name: "busy", reason: "idle by its record, but commands run in it" },
    ]);
    expect(live.state.running).toBe(true);
    expect(busy.state.running).toBe(true);
  });

  it("does not stop a sandbox an acquire in another process took up meanwhile", async () => {
    const taken = await sandbox("taken", longAgo);
    // Between the first look at the record and the stop, another process marks it used.
    fake.containers.before.processes = () => {
      writeFileSync(
        path.join(recordsDirectory(home), "taken.json"),
        JSON.stringify(record("taken", now.toISOString())),
      );
    };
    const report = await stop({});
    expect(report).toEqual({ stopped: [], skipped: [] });
    expect(taken.state.running).toBe(true);
    expect(fake.containers.methods()).not.toContain("stop");
  });

  it("counts a sandbox that stopped meanwhile as nothing to do", async () => {
    const gone = await sandbox("gone", longAgo);
    fake.containers.before.stop = () => {
      gone.state = exitedState(137);
    };
    const report = await stop({});
    expect(report).toEqual({ stopped: [], skipped: [] });
    expect((await new SandboxRecords(home).read("gone"))?.idleStoppedAt).toBeUndefined();
  });
});
