import os from "node:os";

import { connectDocker } from "./client/docker-engine-clients.js";
import {
  endpointFromHost,
  resolveEngineEndpoint,
  type EngineEndpoint,
} from "./client/engine-endpoint.js";
import type {
  ContainerClient,
  EngineClients,
  ImageClient,
  NetworkClient,
  SystemClient,
  VolumeClient,
} from "./client/index.js";

/** What `ping` learns about the engine. */
export interface DockerEngineInfo {
  /** The engine's host name (`docker info` Name); "" when it does not say. */
  name: string;
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
   * Where the engine listens, in DOCKER_HOST syntax: `unix:///var/run/docker.sock` (the default),
   * `tcp://host:port` (plain) or `ssh://user@host`. For TLS and contexts use `DockerEngine.fromEnv`
   * or `endpoint`.
   */
  host?: string | undefined;
  /** The engine as `resolveEngineEndpoint` found it; wins over `host`. */
  endpoint?: EngineEndpoint | undefined;
  /** The environment an ssh transport's `ssh` runs with. Default `process.env`. */
  env?: NodeJS.ProcessEnv | undefined;
  /** Resolves the endpoint (may throw a `ConfigError`); `fromEnv` passes the docker CLI's rules. @internal */
  resolve?: (() => EngineEndpoint) | undefined;
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
  readonly volumes: VolumeClient;
  /** @internal */
  readonly system: SystemClient;

  private readonly resolved: { endpoint: EngineEndpoint } | { error: unknown };

  /**
   * Never throws: an engine that cannot be resolved fails every use with the resolution's
   * `ConfigError` (exit 2, with the fix), so a command that never talks to Docker still works.
   */
  constructor(options: DockerEngineOptions = {}) {
    this.resolved = resolution(
      options.resolve ?? (() => options.endpoint ?? endpointFromHost(options.host)),
    );
    const clients =
      options.clients ??
      ("endpoint" in this.resolved
        ? connectOrFail(this.resolved.endpoint, options.env ?? process.env)
        : failingClients(this.resolved.error));
    this.containers = clients.containers;
    this.images = clients.images;
    this.networks = clients.networks;
    this.volumes = clients.volumes;
    this.system = clients.system;
  }

  /**
   * The engine the docker CLI would use in `env`: DOCKER_HOST (with DOCKER_TLS_VERIFY and
   * DOCKER_CERT_PATH), else the current docker context, else the local socket.
   */
  static fromEnv(env: NodeJS.ProcessEnv): DockerEngine {
    return new DockerEngine({
      env,
      resolve: () => resolveEngineEndpoint({ env, homeDirectory: env["HOME"] || os.homedir() }),
    });
  }

  /** Which engine this is and where that came from; throws the `ConfigError` of an engine that could not be resolved. */
  endpoint(): EngineEndpoint {
    if ("error" in this.resolved) throw this.resolved.error;
    return this.resolved.endpoint;
  }

  /** Fails with `DockerUnavailableError` (exit 3) when no engine answers. */
  async ping(): Promise<DockerEngineInfo> {
    const details = await this.system.describe();
    return {
      name: details.name ?? "",
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

function resolution(
  resolve: () => EngineEndpoint,
): { endpoint: EngineEndpoint } | { error: unknown } {
  try {
    return { endpoint: resolve() };
  } catch (error) {
    return { error };
  }
}

function connectOrFail(endpoint: EngineEndpoint, env: NodeJS.ProcessEnv): EngineClients {
  try {
    return connectDocker(endpoint, env);
  } catch (error) {
    return failingClients(error);
  }
}

/**
 * Clients whose every call rejects with `error` (all client methods are async): the engine could
 * not be resolved, and each use says why, with the fix, instead of reaching some other engine.
 */
function failingClients(cause: unknown): EngineClients {
  const error = cause instanceof Error ? cause : new Error(String(cause));
  const failing = <T extends object>(): T =>
    new Proxy({} as T, {
      // Not thenable: `await client` must not call `then`.
      get: (_target, key) => (key === "then" ? undefined : () => Promise.reject(error)),
    });
  return {
    containers: failing<ContainerClient>(),
    images: failing<ImageClient>(),
    networks: failing<NetworkClient>(),
    volumes: failing<VolumeClient>(),
    system: failing<SystemClient>(),
  };
}
