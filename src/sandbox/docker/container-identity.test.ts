import { describe, expect, it } from "vitest";

import { labelsOf } from "./container-identity.js";
import { labelKeys } from "./container-options.js";
import type { SandboxRecord } from "./records.js";

const memberLabels = {
  [labelKeys.managed]: "true",
  [labelKeys.scope]: "session",
  [labelKeys.scopeKey]: "pool:abc",
  [labelKeys.agent]: "main",
  [labelKeys.session]: "",
  [labelKeys.configHash]: "abc",
  [labelKeys.privateWorkspace]: "/state/workspaces/cordon-pool-abc-1",
  [labelKeys.pool]: "abc",
};

const takenRecord: SandboxRecord = {
  version: 1,
  containerName: "cordon-s1",
  containerId: "c1",
  scopeKey: "session:agent:main:s1@x",
  configHash: "real-hash",
  wantedConfigHash: "real-hash",
  privateWorkspace: "/state/workspaces/cordon-s1",
  createdAt: "2026-11-26T00:00:00.000Z",
  lastUsedAt: "2026-11-26T00:00:00.000Z",
  pooled: { member: "cordon-pool-abc-1", scope: "session", agentId: "main", sessionKey: "s1" },
};

describe("labelsOf", () => {
  it("reads a taken member as the sandbox its record names", () => {
    const labels = labelsOf({ id: "c1", labels: memberLabels }, takenRecord);
    expect(labels[labelKeys.scopeKey]).toBe(takenRecord.scopeKey);
    expect(labels[labelKeys.configHash]).toBe("real-hash");
    expect(labels[labelKeys.session]).toBe("s1");
    expect(labels[labelKeys.privateWorkspace]).toBe("/state/workspaces/cordon-s1");
  });

  it("ignores a record that names another container id: a leftover changes nothing", () => {
    expect(labelsOf({ id: "c2", labels: memberLabels }, takenRecord)).toBe(memberLabels);
  });

  it("ignores records for containers that were never pool members", () => {
    const own = { ...memberLabels };
    delete (own as Record<string, string>)[labelKeys.pool];
    expect(labelsOf({ id: "c1", labels: own }, takenRecord)).toBe(own);
  });

  it("keeps a member nobody took in the pool", () => {
    const { pooled: _pooled, ...plain } = takenRecord;
    expect(labelsOf({ id: "c1", labels: memberLabels }, plain)).toBe(memberLabels);
    expect(labelsOf({ id: "c1", labels: memberLabels }, undefined)).toBe(memberLabels);
  });
});
