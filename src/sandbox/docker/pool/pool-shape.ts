import { randomBytes } from "node:crypto";
import path from "node:path";

import { hashOf } from "../../../common/index.js";
import type { SandboxSpec } from "../../spec.js";

/**
 * Why a sandbox of this spec is never taken from a pool, or undefined when it can be. Each reason
 * is something a pool member, made before the scope was known, cannot have right:
 * - egress: the proxy is named after the container (spec.ts);
 * - carry: the carried trees (node_modules and the like) are not part of the fingerprint that
 *   tells whether a member's seeded copy is still current.
 */
export function unpoolableReason(spec: SandboxSpec): string | undefined {
  if (spec.egress) return "its network is by allowlist (sandbox.egress)";
  if (spec.carry?.length) return "it carries ignored paths (sandbox.carry)";
  return undefined;
}

/**
 * The shape of a sandbox: everything of its spec that shapes the container, without what names
 * one scope (its scope key, container name, session and private workspace's path). Two specs of
 * one shape get interchangeable containers, so a pool is kept per shape (and image).
 */
export function poolShape(spec: SandboxSpec): string {
  const privateWorkspace = spec.privateWorkspace;
  return hashOf({
    scope: spec.scope,
    agentId: spec.agentId,
    workspaceAccess: spec.workspaceAccess,
    agentWorkspace: spec.agentWorkspace,
    diskBytes: spec.diskBytes,
    seed: spec.seed,
    // What the seed leaves out: a member seeded without a secret must not serve one that names it.
    seedInclude: spec.seedInclude ?? [],
    mounts: spec.mounts.map((mount) =>
      mount.source === privateWorkspace ? { ...mount, source: "<private workspace>" } : mount,
    ),
    docker: spec.docker,
  });
}

/** Names of pool members start with this after the container prefix: `<prefix>-pool-<shape>-`. */
export function poolMemberPrefix(spec: SandboxSpec, shape: string): string {
  return `${spec.docker.containerPrefix}-pool-${shape.slice(0, 12)}-`;
}

/**
 * The spec a new pool member of `spec`'s shape is made from: the same container, under a name
 * of its own, with a private workspace of its own beside the ones of real scopes (same
 * filesystem, so taking it is a rename). Its scope key names the pool, so nothing mistakes an
 * untaken member for a sandbox of some session.
 */
export function poolMemberSpec(spec: SandboxSpec, shape: string): SandboxSpec {
  const containerName = `${poolMemberPrefix(spec, shape)}${randomBytes(3).toString("hex")}`;
  const privateWorkspace =
    spec.privateWorkspace && path.join(path.dirname(spec.privateWorkspace), containerName);
  return {
    ...spec,
    scopeKey: poolScopeKey(shape),
    containerName,
    sessionKey: "",
    privateWorkspace,
    mounts: spec.mounts.map((mount) =>
      mount.source === spec.privateWorkspace && privateWorkspace
        ? { ...mount, source: privateWorkspace }
        : mount,
    ),
    // Its labels carry the shape as the config hash: a taken member's record holds the real one.
    configHash: shape,
  };
}

/** The scope key of the untaken members of a pool. */
export function poolScopeKey(shape: string): string {
  return `pool:${shape}`;
}
