import { ConfigError } from "../../common/index.js";

import type { SandboxSpec } from "../spec.js";
import { describeEngineEndpoint, type EngineEndpoint } from "./client/engine-endpoint.js";

/**
 * Whether a sandbox of `spec` can run on the engine at `endpoint`. On an engine that does not
 * share this host's filesystem (tcp, ssh) the private copy lives in volumes there
 * (workspace-volumes.ts), but the workspace itself (`workspaceAccess` "ro"/"rw") can never be
 * bound, and the hosts file cordon writes under network none and the resident executor's binary
 * are still bound from this host: such a sandbox would fail half-way ("bind source path does not
 * exist"). Asked before anything is created; undefined when the sandbox can run there.
 */
export function remoteEngineRefusal(
  endpoint: EngineEndpoint,
  spec: Pick<SandboxSpec, "workspaceAccess" | "agentWorkspace">,
): ConfigError | undefined {
  if (endpoint.sharesFilesystem) return undefined;
  const engine = `the Docker engine at ${describeEngineEndpoint(endpoint)}`;
  const useLocal =
    "run cordon against a local engine for now: unset DOCKER_HOST or DOCKER_CONTEXT, or `docker context use default`";
  const later =
    "the hosts file and executor binary that travel to a remote engine are not built yet (issue 29, item 3)";
  if (spec.workspaceAccess === "ro" || spec.workspaceAccess === "rw") {
    return new ConfigError(
      `workspaceAccess "${spec.workspaceAccess}" binds ${spec.agentWorkspace} into the sandbox, and ${engine} does not share this host's filesystem`,
      {
        fix: `${useLocal}, or set workspaceAccess "none": the private copy then lives in a volume on that engine, and \`cordon apply\` brings its changes here`,
      },
    );
  }
  return new ConfigError(
    `${engine} does not share this host's filesystem, and a sandbox's hosts file and executor are bound from this host`,
    { fix: `${useLocal}; ${later}` },
  );
}
