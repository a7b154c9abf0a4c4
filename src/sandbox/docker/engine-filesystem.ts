import { ConfigError } from "../../common/index.js";

import type { SandboxSpec } from "../spec.js";
import { describeEngineEndpoint, type EngineEndpoint } from "./client/engine-endpoint.js";

/**
 * Whether a sandbox of `spec` can run on the engine at `endpoint`: every sandbox today binds host
 * paths — the workspace (`workspaceAccess` "ro"/"rw") or its private copy, the hosts file cordon
 * writes under network none, the resident executor's binary — and an engine that does not share
 * this host's filesystem (tcp, ssh) would fail on them half-way ("bind source path does not
 * exist"), after the copy was seeded and the proxy started. Asked before anything is created;
 * undefined when the sandbox can run there.
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
    "workspaces that live with a remote engine (volumes, seeded by streaming) are not built yet (issue 29, item 1)";
  if (spec.workspaceAccess === "ro" || spec.workspaceAccess === "rw") {
    return new ConfigError(
      `workspaceAccess "${spec.workspaceAccess}" binds ${spec.agentWorkspace} into the sandbox, and ${engine} does not share this host's filesystem`,
      {
        fix: `${useLocal}. On a remote engine the workspace cannot be bound at all: there the way will be workspaceAccess "none" (a private copy) and \`cordon apply\` — ${later}`,
      },
    );
  }
  return new ConfigError(
    `${engine} does not share this host's filesystem, and a sandbox's private copy, hosts file and executor are bound from this host`,
    { fix: `${useLocal}; ${later}` },
  );
}
