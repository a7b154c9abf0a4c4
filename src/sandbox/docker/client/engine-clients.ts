import type { Readable } from "node:stream";

import type { ContainerClient } from "./container-client.js";

/** Images on the engine: looked up, built, pulled, tagged. Same error rules as `ContainerClient`. */
export interface ImageClient {
  /** undefined when no image has that reference or id. */
  inspect(reference: string): Promise<ImageDetails | undefined>;
  /** Every `repository:tag` of the images in `repository`. */
  tags(repository: string): Promise<string[]>;
  /** Gives the image `reference` one more name. */
  tag(reference: string, repository: string, tag: string): Promise<void>;
  /**
   * Builds an image from a tar context and follows the build to its end, passing every event
   * on. A failed step arrives as an event with `error` on a stream that still ends normally:
   * the caller decides what a build that reported one means. Rejects when the build cannot be
   * started or the stream breaks.
   */
  build(
    context: Readable,
    request: ImageBuildRequest,
    onEvent: (event: ImageBuildStreamEvent) => void,
  ): Promise<void>;
  /** Pulls an image to its end; rejects when it cannot (no registry, no such image). */
  pull(reference: string, options?: { signal?: AbortSignal | undefined }): Promise<void>;
}

export interface ImageDetails {
  id: string;
  labels: Readonly<Record<string, string>>;
  /** Its `ENV`, as `NAME=value`. */
  env: string[];
}

export interface ImageBuildRequest {
  /** The `repository:tag` it gets. */
  tag: string;
  buildArgs?: Record<string, string> | undefined;
  labels?: Record<string, string> | undefined;
  /** The Dockerfile's name in the context (default "Dockerfile"). */
  dockerfile?: string | undefined;
  target?: string | undefined;
  signal?: AbortSignal | undefined;
}

/** One event of the engine's build stream. */
export interface ImageBuildStreamEvent {
  /** Build output (a step's line, a RUN's output). */
  stream?: string | undefined;
  status?: string | undefined;
  /** A step failed, in the engine's words. */
  error?: string | undefined;
}

/** Networks on the engine (the internal networks earlier versions made per sandbox; prune removes them). */
export interface NetworkClient {
  /** undefined when there is none by that name or id. */
  inspect(nameOrId: string): Promise<NetworkDetails | undefined>;
  /** The networks whose labels match every entry (`key` or `key=value`). */
  list(labels: string[]): Promise<NetworkDetails[]>;
  /** False when the name is taken (another process made it). */
  create(request: {
    name: string;
    internal: boolean;
    labels: Record<string, string>;
  }): Promise<boolean>;
  /** Gone counts as removed. */
  remove(nameOrId: string): Promise<void>;
}

export interface NetworkDetails {
  id: string;
  name: string;
  /** No route out: containers on it reach only each other. */
  internal: boolean;
  labels: Readonly<Record<string, string>>;
  /** When the engine made it (ms since the epoch; 0 when it does not say). */
  createdAtMs: number;
  /** Its IPAM configurations that have both. */
  subnets: { subnet: string; gateway: string }[];
}

/** Volumes on the engine (private copies that live with it: workspace-volumes.ts). */
export interface VolumeClient {
  /** undefined when there is none by that name. */
  inspect(name: string): Promise<VolumeDetails | undefined>;
  /** The volumes whose labels match every entry (`key` or `key=value`). */
  list(labels: string[]): Promise<VolumeDetails[]>;
  /** Creates it with the engine's default (local) driver; an existing one is left as it is. */
  create(request: { name: string; labels: Record<string, string> }): Promise<void>;
  /** Gone counts as removed; one still in use by a container fails. */
  remove(name: string): Promise<void>;
}

export interface VolumeDetails {
  name: string;
  /** Where the local driver keeps it on the engine's host. */
  mountpoint: string;
  labels: Readonly<Record<string, string>>;
  /** When the engine made it (ms since the epoch; 0 when it does not say). */
  createdAtMs: number;
}

/** The engine itself. */
export interface SystemClient {
  /** Rejects with `DockerUnavailableError` when no engine answers. */
  describe(): Promise<EngineDetails>;
}

export interface EngineDetails {
  /** The engine's host name (`docker info` Name). */
  name?: string | undefined;
  serverVersion: string;
  apiVersion: string;
  operatingSystem: string;
  /** e.g. "x86_64", "aarch64". */
  architecture: string;
  storageDriver: string;
  cgroupVersion: string;
  /** The runtimes the engine has registered (`runc`, and `runsc` once setup registered gVisor). */
  runtimes: string[];
  /** Each registered runtime's arguments (daemon.json `runtimeArgs`), e.g. runsc's `--platform=…`. */
  runtimeArgs: Record<string, string[]>;
  defaultRuntime: string;
  /** e.g. "name=seccomp,profile=default", "name=userns", "name=rootless", "name=selinux". */
  securityOptions: string[];
}

/** Everything the sandbox layer asks of an engine. */
export interface EngineClients {
  containers: ContainerClient;
  images: ImageClient;
  networks: NetworkClient;
  volumes: VolumeClient;
  system: SystemClient;
}
