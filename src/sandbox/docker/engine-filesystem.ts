import { ConfigError } from "../../common/index.js";

import type { SandboxSpec } from "../spec.js";
import { describeEngineEndpoint, type EngineEndpoint } from "./client/engine-endpoint.js";

/**
 * Whether a sandbox of `spec` can run on the engine at `endpoint`. Everything a sandbox with a
 * private copy mounts can live on an engine that does not share this host's filesystem (tcp, ssh):
 * the copy in volumes there (workspace-volumes.ts), the executor and the hosts file in support
 * volumes (support-volumes.ts). The workspace itself (`workspaceAccess` "ro"/"rw") is a path of
 * this host and can never be bound there. Asked before anything is created; undefined when the
 * sandbox can run there.
 */
export function remoteEngineRefusal(
  endpoint: EngineEndpoint,
  spec: Pick<SandboxSpec, "workspaceAccess" | "agentWorkspace">,
): ConfigError | undefined {
  if (endpoint.sharesFilesystem) return undefined;
  if (spec.workspaceAccess !== "ro" && spec.workspaceAccess !== "rw") return undefined;
  return new ConfigError(
    `workspaceAccess "${spec.workspaceAccess}" binds ${spec.agentWorkspace} into the sandbox, and the Docker engine at ${describeEngineEndpoint(endpoint)} does not share this host's filesystem`,
    {
      fix: 'set workspaceAccess "none": the private copy then lives in volumes on that engine, and `cordon apply` brings its changes here; or run cordon against a local engine (unset DOCKER_HOST or DOCKER_CONTEXT, or `docker context use default`)',
    },
  );
}
