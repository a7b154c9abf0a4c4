import Docker from "dockerode";

import { toSandboxError } from "./docker-errors.js";

/** What `ping` learns about the engine. */
export interface DockerEngineInfo {
  serverVersion: string;
  apiVersion: string;
  operatingSystem: string;
  storageDriver: string;
  cgroupVersion: string;
  /** The runtimes the engine has registered (`runc`, and `runsc` once setup registered gVisor). */
  runtimes: string[];
  defaultRuntime: string;
}

export interface DockerEngineOptions {
  /**
   * Where the engine listens, in DOCKER_HOST syntax: `unix:///var/run/docker.sock` (the default)
   * or `tcp://host:port`.
   */
  host?: string | undefined;
}

const defaultSocket = "/var/run/docker.sock";

function clientFor(host: string | undefined): Docker {
  if (!host) return new Docker({ socketPath: defaultSocket });
  const url = new URL(host);
  if (url.protocol === "unix:") return new Docker({ socketPath: url.pathname });
  if (url.protocol === "tcp:" || url.protocol === "http:") {
    return new Docker({ host: url.hostname, port: Number(url.port || 2375), protocol: "http" });
  }
  throw new Error(`unsupported DOCKER_HOST ${host}: use unix:///path or tcp://host:port`);
}

/**
 * cordon's handle on a Docker engine. Owns the dockerode client; nothing outside
 * `src/sandbox/docker` sees a dockerode type.
 */
export class DockerEngine {
  /** @internal for the docker backend only. */
  readonly client: Docker;

  constructor(options: DockerEngineOptions = {}) {
    this.client = clientFor(options.host);
  }

  /** The engine DOCKER_HOST names in `env`, else the default socket. */
  static fromEnv(env: NodeJS.ProcessEnv): DockerEngine {
    return new DockerEngine({ host: env["DOCKER_HOST"] });
  }

  /** Fails with `DockerUnavailableError` (exit 3) when no engine answers. */
  async ping(): Promise<DockerEngineInfo> {
    try {
      await this.client.ping();
      const [version, info] = await Promise.all([
        this.client.version(),
        this.client.info() as Promise<Record<string, unknown>>,
      ]);
      const text = (key: string) => (typeof info[key] === "string" ? info[key] : "");
      return {
        serverVersion: version.Version,
        apiVersion: version.ApiVersion,
        operatingSystem: text("OperatingSystem"),
        storageDriver: text("Driver"),
        cgroupVersion: text("CgroupVersion"),
        runtimes: Object.keys((info["Runtimes"] as Record<string, unknown> | undefined) ?? {}),
        defaultRuntime: text("DefaultRuntime"),
      };
    } catch (error) {
      throw toSandboxError(error, "answer a ping");
    }
  }
}
