import Docker from "dockerode";

import { toSandboxError } from "./docker-errors.js";

/** What `ping` learns about the engine. */
export interface DockerEngineInfo {
  serverVersion: string;
  apiVersion: string;
  operatingSystem: string;
  storageDriver: string;
  cgroupVersion: string;
}

export interface DockerEngineOptions {
  /** Unix socket path; default: DOCKER_HOST as dockerode reads it, else /var/run/docker.sock. */
  socketPath?: string | undefined;
}

/**
 * cordon's handle on a Docker engine. Owns the dockerode client; nothing outside
 * `src/sandbox/docker` sees a dockerode type.
 */
export class DockerEngine {
  /** @internal for the docker backend only. */
  readonly client: Docker;

  constructor(options: DockerEngineOptions = {}) {
    this.client = options.socketPath
      ? new Docker({ socketPath: options.socketPath })
      : new Docker();
  }

  /** Fails with `DockerUnavailableError` (exit 3) when no engine answers. */
  async ping(): Promise<DockerEngineInfo> {
    try {
      await this.client.ping();
      const [version, info] = await Promise.all([
        this.client.version(),
        this.client.info() as Promise<Record<string, string | undefined>>,
      ]);
      return {
        serverVersion: version.Version,
        apiVersion: version.ApiVersion,
        operatingSystem: info["OperatingSystem"] ?? "",
        storageDriver: info["Driver"] ?? "",
        cgroupVersion: info["CgroupVersion"] ?? "",
      };
    } catch (error) {
      throw toSandboxError(error, "answer a ping");
    }
  }
}
