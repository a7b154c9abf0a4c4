import type { Agent } from "node:http";
import type { Readable } from "node:stream";

import Docker from "dockerode";

import { ConfigError, messageOf } from "../../../common/index.js";

import { toSandboxError, dockerStatusOf } from "../docker-errors.js";
import { DockerContainerClient } from "./docker-container-client.js";
import { defaultEngineEndpoint, type EngineEndpoint } from "./engine-endpoint.js";
import { sshDialAgent } from "./ssh-dial.js";
import type {
  EngineClients,
  EngineDetails,
  ImageBuildRequest,
  ImageBuildStreamEvent,
  ImageClient,
  ImageDetails,
  NetworkClient,
  NetworkDetails,
  SystemClient,
  VolumeClient,
  VolumeDetails,
} from "./engine-clients.js";

/**
 * The clients of the engine at `endpoint` (`resolveEngineEndpoint`). Connects lazily: nothing is
 * sent until a client is used. `env`: what an ssh transport's `ssh` runs with.
 */
export function connectDocker(
  endpoint: EngineEndpoint = defaultEngineEndpoint,
  env: NodeJS.ProcessEnv = process.env,
): EngineClients {
  const docker = dockerFor(endpoint, env);
  return {
    containers: new DockerContainerClient(docker),
    images: new DockerImageClient(docker),
    networks: new DockerNetworkClient(docker),
    volumes: new DockerVolumeClient(docker),
    system: new DockerSystemClient(docker),
  };
}

/**
 * The one place dockerode is constructed. Every connection setting is given explicitly, even as
 * undefined: docker-modem fills whatever is missing from this process's DOCKER_HOST,
 * DOCKER_TLS_VERIFY and DOCKER_CERT_PATH, which need not be the environment cordon resolved.
 */
function dockerFor(endpoint: EngineEndpoint, env: NodeJS.ProcessEnv): Docker {
  const { transport } = endpoint;
  const none = {
    socketPath: undefined,
    host: undefined,
    port: undefined,
    ca: undefined,
    cert: undefined,
    key: undefined,
    protocol: "http" as const,
  };
  // `agent` is docker-modem's (an http.Agent for every request); the types do not list it.
  const options: Docker.DockerOptions & { agent?: Agent } =
    transport.kind === "unix"
      ? { ...none, socketPath: transport.socketPath }
      : transport.kind === "tcp"
        ? {
            ...none,
            host: transport.hostname,
            port: transport.port,
            ...(transport.tls
              ? {
                  protocol: "https" as const,
                  ca: transport.tls.ca,
                  cert: transport.tls.cert,
                  key: transport.tls.key,
                }
              : {}),
          }
        : {
            ...none,
            // The address only names the request; the agent's connections are ssh processes.
            host: "docker",
            port: 80,
            agent: sshDialAgent(transport, env),
          };
  try {
    return new Docker(options);
  } catch (error) {
    // docker-modem parses this process's DOCKER_* variables in its constructor and throws on them.
    throw new ConfigError(`cannot set up the Docker client: ${messageOf(error)}`, {
      fix: "check DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH (`cordon doctor` says which engine cordon resolves)",
      cause: error,
    });
  }
}

/** Follows one of the engine's progress streams (build, pull) to its end. */
function follow(
  docker: Docker,
  stream: NodeJS.ReadableStream,
  onEvent: (event: ImageBuildStreamEvent) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    docker.modem.followProgress(
      stream,
      (error) => (error ? reject(error) : resolve()),
      (event: {
        stream?: string;
        status?: string;
        error?: string;
        errorDetail?: { message?: string };
      }) => {
        const error = event.errorDetail?.message ?? event.error;
        onEvent({
          ...(event.stream !== undefined ? { stream: event.stream } : {}),
          ...(event.status !== undefined ? { status: event.status } : {}),
          ...(error !== undefined ? { error } : {}),
        });
      },
    );
  });
}

class DockerImageClient implements ImageClient {
  constructor(private readonly docker: Docker) {}

  async inspect(reference: string): Promise<ImageDetails | undefined> {
    try {
      const info = await this.docker.getImage(reference).inspect();
      return { id: info.Id, labels: info.Config.Labels ?? {}, env: info.Config.Env ?? [] };
    } catch (error) {
      if (dockerStatusOf(error) === 404) return undefined;
      throw toSandboxError(error, `inspect image ${reference}`);
    }
  }

  async tags(repository: string): Promise<string[]> {
    try {
      const images = await this.docker.listImages({ filters: { reference: [repository] } });
      return images.flatMap((image) => image.RepoTags ?? []);
    } catch (error) {
      throw toSandboxError(error, "list images");
    }
  }

  async tag(reference: string, repository: string, tag: string): Promise<void> {
    try {
      await this.docker.getImage(reference).tag({ repo: repository, tag });
    } catch (error) {
      throw toSandboxError(error, `tag ${reference} as ${repository}:${tag}`);
    }
  }

  async build(
    context: Readable,
    request: ImageBuildRequest,
    onEvent: (event: ImageBuildStreamEvent) => void,
  ): Promise<void> {
    let stream: NodeJS.ReadableStream;
    try {
      stream = await this.docker.buildImage(context, {
        t: request.tag,
        ...(request.buildArgs ? { buildargs: request.buildArgs } : {}),
        ...(request.labels ? { labels: request.labels } : {}),
        ...(request.dockerfile ? { dockerfile: request.dockerfile } : {}),
        ...(request.target ? { target: request.target } : {}),
        rm: true,
        forcerm: true,
        ...(request.signal ? { abortSignal: request.signal } : {}),
      });
    } catch (error) {
      throw toSandboxError(error, `start the build of ${request.tag}`);
    }
    try {
      await follow(this.docker, stream, onEvent);
    } catch (error) {
      throw toSandboxError(error, `build ${request.tag}`);
    }
  }

  async pull(reference: string, options: { signal?: AbortSignal | undefined } = {}): Promise<void> {
    try {
      const stream = await this.docker.pull(
        reference,
        options.signal ? { abortSignal: options.signal } : {},
      );
      await follow(this.docker, stream, () => undefined);
    } catch (error) {
      throw toSandboxError(error, `pull ${reference}`);
    }
  }
}

interface NetworkInfo {
  Id: string;
  Name: string;
  Internal?: boolean;
  Labels?: Record<string, string> | null;
  Created?: string;
  IPAM?: { Config?: { Gateway?: string; Subnet?: string }[] | null };
}

function networkOf(info: NetworkInfo): NetworkDetails {
  return {
    id: info.Id,
    name: info.Name,
    internal: info.Internal ?? false,
    labels: info.Labels ?? {},
    createdAtMs: (info.Created && Date.parse(info.Created)) || 0,
    subnets: (info.IPAM?.Config ?? []).flatMap((entry) =>
      entry.Gateway && entry.Subnet ? [{ subnet: entry.Subnet, gateway: entry.Gateway }] : [],
    ),
  };
}

class DockerNetworkClient implements NetworkClient {
  constructor(private readonly docker: Docker) {}

  async inspect(nameOrId: string): Promise<NetworkDetails | undefined> {
    try {
      return networkOf((await this.docker.getNetwork(nameOrId).inspect()) as NetworkInfo);
    } catch (error) {
      if (dockerStatusOf(error) === 404) return undefined;
      throw toSandboxError(error, `inspect the network ${nameOrId}`);
    }
  }

  async list(labels: string[]): Promise<NetworkDetails[]> {
    try {
      const networks = (await this.docker.listNetworks({
        filters: { label: labels },
      })) as NetworkInfo[];
      return networks.map(networkOf);
    } catch (error) {
      throw toSandboxError(error, "list networks");
    }
  }

  async create(request: {
    name: string;
    internal: boolean;
    labels: Record<string, string>;
  }): Promise<boolean> {
    try {
      await this.docker.createNetwork({
        Name: request.name,
        Internal: request.internal,
        CheckDuplicate: true,
        Labels: request.labels,
      });
      return true;
    } catch (error) {
      if (dockerStatusOf(error) === 409) return false;
      throw toSandboxError(error, `create the network ${request.name}`);
    }
  }

  async remove(nameOrId: string): Promise<void> {
    try {
      await this.docker.getNetwork(nameOrId).remove();
    } catch (error) {
      if (dockerStatusOf(error) !== 404) {
        throw toSandboxError(error, `remove the network ${nameOrId}`);
      }
    }
  }
}

interface VolumeInfo {
  Name: string;
  Mountpoint: string;
  Labels?: Record<string, string> | null;
  CreatedAt?: string;
}

function volumeOf(info: VolumeInfo): VolumeDetails {
  return {
    name: info.Name,
    mountpoint: info.Mountpoint,
    labels: info.Labels ?? {},
    createdAtMs: (info.CreatedAt && Date.parse(info.CreatedAt)) || 0,
  };
}

class DockerVolumeClient implements VolumeClient {
  constructor(private readonly docker: Docker) {}

  async inspect(name: string): Promise<VolumeDetails | undefined> {
    try {
      return volumeOf(await this.docker.getVolume(name).inspect());
    } catch (error) {
      if (dockerStatusOf(error) === 404) return undefined;
      throw toSandboxError(error, `inspect the volume ${name}`);
    }
  }

  async list(labels: string[]): Promise<VolumeDetails[]> {
    try {
      const found = (await this.docker.listVolumes({ filters: { label: labels } })) as {
        Volumes?: VolumeInfo[] | null;
      };
      return (found.Volumes ?? []).map(volumeOf);
    } catch (error) {
      throw toSandboxError(error, "list volumes");
    }
  }

  async create(request: { name: string; labels: Record<string, string> }): Promise<void> {
    try {
      // The engine answers an existing name with that volume: creating is idempotent.
      await this.docker.createVolume({ Name: request.name, Labels: request.labels });
    } catch (error) {
      throw toSandboxError(error, `create the volume ${request.name}`);
    }
  }

  async remove(name: string): Promise<void> {
    try {
      await this.docker.getVolume(name).remove();
    } catch (error) {
      if (dockerStatusOf(error) !== 404) throw toSandboxError(error, `remove the volume ${name}`);
    }
  }
}

class DockerSystemClient implements SystemClient {
  constructor(private readonly docker: Docker) {}

  async describe(): Promise<EngineDetails> {
    try {
      await this.docker.ping();
      const [version, info] = await Promise.all([
        this.docker.version(),
        this.docker.info() as Promise<Record<string, unknown>>,
      ]);
      const text = (key: string) => (typeof info[key] === "string" ? info[key] : "");
      const securityOptions = info["SecurityOptions"];
      return {
        name: text("Name"),
        serverVersion: version.Version,
        apiVersion: version.ApiVersion,
        operatingSystem: text("OperatingSystem"),
        architecture: text("Architecture"),
        storageDriver: text("Driver"),
        cgroupVersion: text("CgroupVersion"),
        runtimes: Object.keys(registeredRuntimes(info)),
        runtimeArgs: runtimeArgsOf(registeredRuntimes(info)),
        defaultRuntime: text("DefaultRuntime"),
        securityOptions: Array.isArray(securityOptions)
          ? securityOptions.filter((o): o is string => typeof o === "string")
          : [],
      };
    } catch (error) {
      throw toSandboxError(error, "answer a ping");
    }
  }
}

function registeredRuntimes(info: Record<string, unknown>): Record<string, unknown> {
  const runtimes = info["Runtimes"];
  return typeof runtimes === "object" && runtimes !== null
    ? (runtimes as Record<string, unknown>)
    : {};
}

/** `Runtimes.<name>.runtimeArgs` of `docker info`, strings only. */
function runtimeArgsOf(runtimes: Record<string, unknown>): Record<string, string[]> {
  return Object.fromEntries(
    Object.entries(runtimes).map(([name, entry]) => {
      const args = (entry as { runtimeArgs?: unknown } | null)?.runtimeArgs;
      return [
        name,
        Array.isArray(args) ? args.filter((a): a is string => typeof a === "string") : [],
      ];
    }),
  );
}
