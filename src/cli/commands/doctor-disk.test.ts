import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { describe, expect, it } from "vitest";

import type { EngineEndpoint } from "../../sandbox/index.js";
import { checkDiskBudget } from "./doctor.js";

const elsewhere: EngineEndpoint = {
  host: "ssh://builder@box",
  source: { kind: "DOCKER_HOST" },
  transport: { kind: "ssh", hostname: "box", user: "builder" },
  sharesFilesystem: false,
};

describe("doctor's disk check", () => {
  it("on an engine elsewhere says copies are volumes, watched and not bounded, and makes nothing here", async () => {
    const stateDir = path.join(tmpdir(), `cordon-doctor-disk-${process.pid}-absent`);
    const check = await checkDiskBudget(stateDir, elsewhere);
    expect(check).toMatchObject({ name: "disk", status: "warn" });
    expect(check.detail).toMatch(/volumes on the engine.*watched.*not enforced/);
    // No trial image was made or mounted on this host for an engine that cannot see it.
    expect(existsSync(stateDir)).toBe(false);
  });
});
