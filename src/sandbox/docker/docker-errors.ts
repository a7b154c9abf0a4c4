import { DockerUnavailableError, SandboxError, SandboxStartError } from "../../common/index.js";

const unreachableCodes = new Set(["ENOENT", "ECONNREFUSED", "EACCES", "ECONNRESET", "EPIPE"]);

/** Node's TLS failures: certificate checks (`CERT_…`, `…_SIGNATURE`, `ERR_TLS_…`) and handshakes (`EPROTO`). */
const tlsFailure = /CERT|SIGNATURE|SELF_SIGNED|ISSUER|^ERR_TLS_|^ERR_SSL_|^EPROTO$/;

const tlsFix =
  "check the TLS material (DOCKER_CERT_PATH, or the docker context's): ca.pem must be the CA that signed the engine's certificate, which must name the host cordon dials; cert.pem and key.pem a client certificate the engine accepts. `docker version` with the same settings shows whether they work";

/** How to get a Docker engine, for every message that says there is none. */
export const dockerFix =
  "start the Docker engine (e.g. `sudo systemctl start docker`) or point DOCKER_HOST at a running one, then run `cordon setup`";

function errnoOf(error: unknown): string | undefined {
  if (typeof error === "object" && error !== null && "code" in error) {
    const code = error.code;
    if (typeof code === "string") return code;
  }
  return undefined;
}

/**
 * Where a connection failed, in DOCKER_HOST syntax, from the socket error itself: the engine the
 * user has to start or fix, whichever way it was chosen.
 */
function endpointOf(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null || !("address" in error)) return undefined;
  const { address } = error;
  if (typeof address !== "string") return undefined;
  const port = "port" in error ? error.port : undefined;
  return typeof port === "number" ? `tcp://${address}:${port}` : `unix://${address}`;
}

/** The HTTP status of a Docker API error, if it is one. */
export function dockerStatusOf(error: unknown): number | undefined {
  if (typeof error === "object" && error !== null && "statusCode" in error) {
    const status = error.statusCode;
    if (typeof status === "number") return status;
  }
  return undefined;
}

/**
 * The HTTP status behind an error from the engine clients: theirs are `SandboxError`s whose
 * cause (or a cause's cause, once a caller has said what it was doing) is the engine's error.
 */
export function engineStatusOf(error: unknown): number | undefined {
  for (let at = error, depth = 0; at !== undefined && depth < 4; depth += 1) {
    const status = dockerStatusOf(at);
    if (status !== undefined) return status;
    at = at instanceof Error ? at.cause : undefined;
  }
  return undefined;
}

/** The engine's own message of a Docker API error, without dockerode's prefix. */
export function dockerMessageOf(error: unknown): string {
  if (typeof error === "object" && error !== null && "json" in error) {
    const json = error.json;
    if (typeof json === "object" && json !== null && "message" in json) {
      return String(json.message);
    }
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * The one table that maps Docker failures to cordon errors: an unreachable engine becomes
 * `DockerUnavailableError` (exit 3, with the fix), anything else a `SandboxError` naming `action`.
 */
export function toSandboxError(error: unknown, action: string): SandboxError {
  if (error instanceof SandboxError) return error;
  const errno = errnoOf(error);
  if (errno && unreachableCodes.has(errno)) {
    const endpoint = endpointOf(error);
    return new DockerUnavailableError(
      `cannot reach the Docker engine${endpoint ? ` at ${endpoint}` : ""} (${errno}) while trying to ${action}`,
      {
        fix: dockerFix,
        cause: error,
      },
    );
  }
  if (errno && tlsFailure.test(errno)) {
    return new DockerUnavailableError(
      `the TLS connection to the Docker engine failed (${errno}: ${dockerMessageOf(error)}) while trying to ${action}`,
      { fix: tlsFix, cause: error },
    );
  }
  const status = dockerStatusOf(error);
  const detail = dockerMessageOf(error);
  if (status === 400 && /HTTP request to an HTTPS server/i.test(detail)) {
    return new DockerUnavailableError(
      `the Docker engine speaks TLS, and cordon spoke plain HTTP to it while trying to ${action}`,
      {
        fix: "export DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH=<the directory with ca.pem, cert.pem and key.pem>, or use a docker context made with them (`docker context create NAME --docker host=tcp://…,ca=…,cert=…,key=…`)",
        cause: error,
      },
    );
  }
  return new SandboxError(
    `Docker failed to ${action}${status ? ` (HTTP ${status})` : ""}: ${detail}`,
    {
      cause: error,
    },
  );
}

/** A create/start failure as a `SandboxStartError` with the remedy, or Docker being unreachable. */
export function startError(error: unknown, action: string): SandboxError {
  const mapped = toSandboxError(error, action);
  if (mapped.code === "docker_unavailable") return mapped;
  const detail = dockerMessageOf(error);
  let fix =
    "check the sandbox.docker settings (`cordon sandbox explain` shows them); `cordon doctor` checks the engine";
  if (/runtime/i.test(detail)) {
    fix = "check sandbox.docker.runtime: `docker info` lists the runtimes this engine has";
  } else if (/bind source path|mount/i.test(detail)) {
    fix = "check the sandbox mounts: every source must exist on the Docker host";
  }
  return new SandboxStartError(`cannot ${action}: ${detail}`, { fix, cause: error });
}
