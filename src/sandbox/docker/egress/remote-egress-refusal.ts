import { ConfigError } from "../../../common/index.js";

import type { SandboxSpec } from "../../spec.js";
import { describeEngineEndpoint, type EngineEndpoint } from "../client/engine-endpoint.js";

/**
 * Whether the egress proxy of `spec` can work on the engine at `endpoint`. The sandbox reaches its
 * squid through a port cordon forwards over the executor channel, and cordon's process relays each
 * connection to squid's address on the engine's default bridge (proxy-channel.ts): an address only
 * a process on the engine's own host can reach. On an engine elsewhere the proxy would start there,
 * every connection through it would fail, and the proxy and its network would be left running; so
 * it is refused before anything is created. undefined when the proxy can work there.
 */
export function remoteEgressRefusal(
  endpoint: EngineEndpoint,
  spec: Pick<SandboxSpec, "egress">,
): ConfigError | undefined {
  if (endpoint.sharesFilesystem || spec.egress === undefined) return undefined;
  const allow = spec.egress.allow;
  const what =
    allow.length > 0
      ? `an egress allowlist (${allow.join(", ")})`
      : "the egress proxy an agent runtime that calls the model itself needs";
  return new ConfigError(
    `${what} cannot work with the Docker engine at ${describeEngineEndpoint(endpoint)}: cordon reaches the sandbox's proxy at its address on that engine's bridge, which only the engine's own host can reach`,
    {
      fix: "run without --allow-host / sandbox.egress (the sandbox keeps network none), or run cordon on the engine's host (or against a local engine: unset DOCKER_HOST or DOCKER_CONTEXT)",
    },
  );
}
