import { connectDocker } from "./client/docker-engine-clients.js";
import type {
  ContainerClient,
  EngineClients,
  ImageClient,
  NetworkClient,
  SystemClient,
} from "./client/index.js";

/** What `ping` learns about the engine. */
export interface DockerEngineInfo {
  serverVersion: string;
  apiVersion: string;
  operatingSystem: string;
  storageDriver: string;
  cgroupVersion: string;
  /** The runtimes the engine has registered (`runc`, and `runsc` once setup registered gVisor). */
  runtimes: string[];
  /** Each registered runtime's arguments (daemon.json `runtimeArgs`), e.g. runsc's `--platform=…`. */
  runtimeArgs: Record<string, string[]>;
  defaultRuntime: string;
}

export interface DockerEngineOptions {
  /**
   * Where the engine listens, in DOCKER_HOST syntax: `unix:///var/run/docker.sock` (the default)
   * or `tcp://host:port`.
   */
  host?: string | undefined;
  /** The clients to use instead of connecting to `host` (unit tests pass fakes). @internal */
  clients?: EngineClients | undefined;
}

/**
 * cordon's handle on a Docker engine. It holds the engine clients (client/), the only code that
 * speaks to Docker; nothing outside `src/sandbox/docker` sees them.
 */
export class DockerEngine {
  /** @internal for the docker backend only. */
  readonly containers: ContainerClient;
  /** @internal */
  readonly images: ImageClient;
  /** @internal */
  readonly networks: NetworkClient;
  /** @internal */
  readonly system: SystemClient;

  constructor(options: DockerEngineOptions = {}) {
    const clients = options.clients ?? connectDocker(options.host);
    this.containers = clients.containers;
    this.images = clients.images;
    this.networks = clients.networks;
    this.system = clients.system;
  }

  /** The engine DOCKER_HOST names in `env`, else the default socket. */
  static fromEnv(env: NodeJS.ProcessEnv): DockerEngine {
    return new DockerEngine({ host: env["DOCKER_HOST"] });
  }

  /** Fails with `DockerUnavailableError` (exit 3) when no engine answers. */
  async ping(): Promise<DockerEngineInfo> {
    const details = await this.system.describe();
    return {
      serverVersion: details.serverVersion,
      apiVersion: details.apiVersion,
      operatingSystem: details.operatingSystem,
      storageDriver: details.storageDriver,
      cgroupVersion: details.cgroupVersion,
      runtimes: details.runtimes,
      runtimeArgs: details.runtimeArgs,
      defaultRuntime: details.defaultRuntime,
    };
  }
}
