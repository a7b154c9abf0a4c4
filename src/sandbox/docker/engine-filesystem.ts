import { ConfigError } from "../../common/index.js";

import type { MountSpec, SandboxSpec } from "../spec.js";
import { describeEngineEndpoint, type EngineEndpoint } from "./client/engine-endpoint.js";

/**
 * Whether a sandbox of `spec` can run on the engine at `endpoint`. Everything a sandbox with a
 * private copy mounts can live on an engine that does not share this host's filesystem (tcp, ssh):
 * the copy in volumes there (workspace-volumes.ts), the executor and the hosts file in support
 * volumes (support-volumes.ts), and so the host's CA bundle of `trustHostCertificates`
 * (ca-certificates.ts). The workspace itself (`workspaceAccess` "ro"/"rw") is a path of this host
 * and can never be bound there, nor can `docker.binds`. Asked before anything is created;
 * undefined when the sandbox can run there.
 */
export function remoteEngineRefusal(
  endpoint: EngineEndpoint,
  spec: Pick<SandboxSpec, "workspaceAccess" | "agentWorkspace"> & {
    mounts?: readonly Pick<MountSpec, "source" | "target" | "role">[] | undefined;
  },
): ConfigError | undefined {
  if (endpoint.sharesFilesystem) return undefined;
  const engine = `the Docker engine at ${describeEngineEndpoint(endpoint)} does not share this host's filesystem`;
  const useLocal =
    "run cordon against a local engine (unset DOCKER_HOST or DOCKER_CONTEXT, or `docker context use default`)";
  if (spec.workspaceAccess === "ro" || spec.workspaceAccess === "rw") {
    return new ConfigError(
      `workspaceAccess "${spec.workspaceAccess}" binds ${spec.agentWorkspace} into the sandbox, and ${engine}`,
      {
        fix: `set workspaceAccess "none": the private copy then lives in volumes on that engine, and \`cordon apply\` brings its changes here; or ${useLocal}`,
      },
    );
  }
  // The engine would bind whatever its own host has at these paths, or fail half-way.
  const hostPaths = (spec.mounts ?? []).filter((mount) => hostPathRoles.has(mount.role));
  if (hostPaths.length === 0) return undefined;
  const named = hostPaths.map((mount) => `${mount.source} at ${mount.target}`).join(", ");
  return new ConfigError(`the sandbox binds this host's ${named}, and ${engine}`, {
    fix: `remove those sandbox.docker.binds (copy what they hold into a project image: docs/images.md), or ${useLocal}`,
  });
}

/**
 * Mounts whose source is a path of this host the engine would have to bind (the workspace's own
 * roles are covered above; the CA bundle travels in a support volume).
 */
const hostPathRoles = new Set<MountSpec["role"]>(["bind"]);
