import { describe, expect, it } from "vitest";

import { hardenedDockerSettings } from "../../../../test/support/sandbox-spec.js";
import type { SandboxSpec } from "../../spec.js";
import { poolMemberPrefix, poolMemberSpec, poolShape, unpoolableReason } from "./pool-shape.js";

function spec(session: string, overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  const containerName = `cordon-${session}-0123456789`;
  const privateWorkspace = `/state/workspaces/${containerName}`;
  return {
    scope: "session",
    scopeKey: `session:agent:main:${session}@abc`,
    containerName,
    agentId: "main",
    sessionKey: `agent:main:${session}`,
    workspaceAccess: "none",
    agentWorkspace: "/home/me/project",
    privateWorkspace,
    seed: false,
    mounts: [
      { source: privateWorkspace, target: "/workspace", readOnly: false, role: "workspace" },
      { source: "/home/me/cache", target: "/cache", readOnly: true, role: "bind" },
    ],
    docker: hardenedDockerSettings(),
    configHash: `hash-of-${session}`,
    ...overrides,
  };
}

describe("poolShape", () => {
  it("is one shape for sessions that differ only in what names them", () => {
    expect(poolShape(spec("a"))).toBe(poolShape(spec("b")));
  });

  it("differs for anything that shapes the container or its workspace", () => {
    const base = poolShape(spec("a"));
    const docker = spec("a").docker;
    expect(poolShape(spec("a", { docker: { ...docker, memoryBytes: 2 * 1024 ** 3 } }))).not.toBe(
      base,
    );
    expect(poolShape(spec("a", { agentWorkspace: "/home/me/other" }))).not.toBe(base);
    expect(poolShape(spec("a", { diskBytes: 1024 ** 3 }))).not.toBe(base);
    expect(poolShape(spec("a", { agentId: "ops" }))).not.toBe(base);
    const mounts = spec("a").mounts.map((m) => (m.role === "bind" ? { ...m, readOnly: false } : m));
    expect(poolShape(spec("a", { mounts }))).not.toBe(base);
  });
});

describe("poolMemberSpec", () => {
  it("names a member of the pool, with its own workspace beside the sandbox's, mounted where the sandbox's would be", () => {
    const s = spec("a");
    const shape = poolShape(s);
    const member = poolMemberSpec(s, shape);
    expect(member.containerName.startsWith(poolMemberPrefix(s, shape))).toBe(true);
    expect(member.scopeKey).toBe(`pool:${shape}`);
    expect(member.privateWorkspace).toBe(`/state/workspaces/${member.containerName}`);
    expect(member.mounts[0]).toEqual({ ...s.mounts[0], source: member.privateWorkspace });
    expect(member.mounts[1]).toEqual(s.mounts[1]);
    expect(member.configHash).toBe(shape);
    expect(poolMemberSpec(s, shape).containerName).not.toBe(member.containerName);
  });
});

describe("unpoolableReason", () => {
  it("keeps carried paths and egress out of the pool, and says which key", () => {
    expect(unpoolableReason(spec("a"))).toBeUndefined();
    expect(unpoolableReason(spec("a", { workspaceAccess: "rw", seed: true }))).toBeUndefined();
    // A seeded copy is pooled: a take checks its fingerprint (warm-pool.integration.test.ts).
    expect(unpoolableReason(spec("a", { seed: true }))).toBeUndefined();
    expect(unpoolableReason(spec("a", { carry: ["node_modules"] }))).toMatch(/sandbox\.carry/);
    const egress = {
      allow: ["registry.npmjs.org"],
      proxyContainer: "p",
      proxyPort: 3128,
    };
    expect(unpoolableReason(spec("a", { egress }))).toMatch(/sandbox\.egress/);
  });
});
