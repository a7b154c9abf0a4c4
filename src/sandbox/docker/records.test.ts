import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { SandboxRecords, recordsDirectory, type SandboxRecord } from "./records.js";

let home: string;
beforeEach(async () => {
  home = await mkdtemp(path.join(tmpdir(), "cordon-records-"));
});
afterEach(async () => {
  await rm(home, { recursive: true, force: true });
});

const record = (name: string): SandboxRecord => ({
  version: 1,
  containerName: name,
  containerId: "abc",
  scopeKey: "session:x",
  configHash: "h1",
  wantedConfigHash: "h1",
  createdAt: "2026-01-01T00:00:00.000Z",
  lastUsedAt: "2026-01-01T00:00:00.000Z",
});

describe("SandboxRecords", () => {
  it("writes, reads, updates and removes a record, leaving no temporary files", async () => {
    const records = new SandboxRecords(home);
    await records.write(record("cordon-a"));
    await records.update("cordon-a", (r) => ({ ...r, lastUsedAt: "2026-02-02T00:00:00.000Z" }));
    expect((await records.read("cordon-a"))?.lastUsedAt).toBe("2026-02-02T00:00:00.000Z");
    expect(await readdir(recordsDirectory(home))).toEqual(["cordon-a.json"]);
    await records.remove("cordon-a");
    expect(await records.read("cordon-a")).toBeUndefined();
  });

  it("ignores files that are not valid records", async () => {
    const records = new SandboxRecords(home);
    await records.write(record("cordon-good"));
    await writeFile(path.join(recordsDirectory(home), "cordon-torn.json"), '{"version":1,');
    await writeFile(path.join(recordsDirectory(home), "cordon-other.json"), '{"version":2}');
    expect((await records.readAll()).map((r) => r.containerName)).toEqual(["cordon-good"]);
  });

  it("refuses names that could leave the records directory", async () => {
    const records = new SandboxRecords(home);
    await expect(records.write(record("../escape"))).rejects.toThrow(/invalid container name/);
    await expect(records.read("../../etc/passwd")).resolves.toBeUndefined();
  });
});
