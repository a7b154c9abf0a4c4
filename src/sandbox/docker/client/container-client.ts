import type { Duplex, Readable } from "node:stream";

/**
 * The container engine as the sandbox layer sees it: the only surface between cordon and Docker.
 * `DockerContainerClient` speaks it over dockerode and is the one place Docker's status quirks
 * are handled (404 on inspect is "absent", 409 on create "the name is taken", 304 on start and
 * stop and 404 on remove "already done"); `FakeContainerClient` (./testing) plays it in unit
 * tests. Nothing here is a dockerode type, so the layer above can be tested without an engine
 * and the backend swapped without touching it (testcontainers-node's `ContainerClient` leaks
 * dockerode's `Container` through every method, which is what made it hard to replace).
 *
 * Failures other than the mapped statuses reject with a `SandboxError` (a
 * `DockerUnavailableError` when no engine answers) whose `cause` is the engine's error;
 * `engineStatusOf` reads its HTTP status.
 */
export interface ContainerClient {
  /** undefined when no container has that name or id. */
  inspect(nameOrId: string): Promise<ContainerDetails | undefined>;
  /**
   * Bytes in the container's writable root layer (the engine's SizeRw, measured on the host);
   * 0 for a container that does not exist.
   */
  writableLayerBytes(nameOrId: string): Promise<number>;
  /** The containers whose labels match every entry of `filter.labels`. */
  list(filter: ContainerFilter): Promise<ContainerSummary[]>;
  /**
   * Creates a container; its id, or undefined when the name is taken (another process made it).
   * Failures reject with a `SandboxStartError` that names the setting to check.
   */
  create(request: CreateContainerRequest): Promise<string | undefined>;
  /**
   * Starts it; already running counts as started. Failures: `SandboxStartError`, naming it
   * `name` (default `nameOrId`: an id reads badly in a message).
   */
  start(nameOrId: string, name?: string): Promise<void>;
  /**
   * Stops it (SIGTERM, then SIGKILL after `graceSeconds`); false when it was not running or is
   * gone, so nothing was stopped.
   */
  stop(nameOrId: string, options: { graceSeconds: number }): Promise<boolean>;
  /** Kills every process (it stops); one not running or gone counts as done. */
  kill(nameOrId: string): Promise<void>;
  /** Freezes every process in it (the cgroup freezer); `unpause` thaws them. */
  pause(nameOrId: string): Promise<void>;
  unpause(nameOrId: string): Promise<void>;
  /**
   * Removes it in any state, with its anonymous volumes; gone counts as removed, and a removal
   * already under way (by someone else) is waited for. Errors name it `name` (default `nameOrId`).
   */
  remove(nameOrId: string, name?: string): Promise<void>;
  /**
   * Gives it a new name (its id, labels and mounts stay). False when the name is taken: Docker
   * checks and renames in one step, so of two processes renaming to one name, one wins.
   */
  rename(nameOrId: string, newName: string): Promise<boolean>;
  /** Waits until it stops; its exit code. */
  wait(nameOrId: string): Promise<number>;
  /** The command line of every process running in it (`docker top`). */
  processes(nameOrId: string): Promise<string[]>;
  /**
   * Its CPU and memory use now, as `docker stats --no-stream` reads them (the engine samples about
   * a second apart for the CPU share); undefined when it is not running or gone.
   */
  stats(nameOrId: string): Promise<ContainerStats | undefined>;
  /**
   * Its log so far, as the engine keeps it: multiplexed frames (8-byte headers) unless the
   * container has a TTY. For short, trusted logs (a proxy's start, a probe's output).
   */
  logs(nameOrId: string, options: { stdout: boolean; stderr: boolean }): Promise<Buffer>;
  /**
   * Its stdout from `sinceSeconds` (Unix time) on, each line prefixed with the engine's RFC 3339
   * time, followed until the returned stream is destroyed or the container stops.
   */
  followStdout(nameOrId: string, options: { sinceSeconds: number }): Promise<Readable>;
  /** Starts one process in a running container. */
  exec(nameOrId: string, request: ExecStartRequest): Promise<StartedExec>;
  /**
   * Extracts a tar stream into the container at `directory` (the engine's archive API, as
   * `docker cp -` does): works on a created container that never started, so no program of the
   * container runs, and into its volume mounts too. Owners, modes and links come from the tar's
   * headers, which the caller writes.
   */
  putArchive(nameOrId: string, directory: string, archive: Readable): Promise<void>;
  /**
   * A tar stream of `source` in the container (the engine's archive API, as `docker cp C:SRC -`
   * does), its entries named from `source`'s last component: works on a created container that
   * never started, and out of its volume mounts too. Only for trees of cordon's own: the host
   * passes it on, unread.
   */
  getArchive(nameOrId: string, source: string): Promise<Readable>;
  /** Joins a container to a network, reachable there under `aliases`. */
  connect(network: string, nameOrId: string, aliases: string[]): Promise<void>;
}

/** Docker's container states. */
export type ContainerStatus =
  "created" | "running" | "paused" | "restarting" | "removing" | "exited" | "dead";

export interface ContainerState {
  status: ContainerStatus;
  /** True for a paused container too (its processes exist, frozen). */
  running: boolean;
  paused: boolean;
  restarting: boolean;
  /** The kernel's OOM killer ended its main process. */
  oomKilled: boolean;
  dead: boolean;
  /** The main process's exit code (128 + N for a death by signal N); 0 while it runs. */
  exitCode: number;
  /** Why the last start failed, in the engine's words; "" when it did not. */
  error: string;
}

/** One container as `inspect` sees it. */
export interface ContainerDetails {
  id: string;
  /** Without Docker's leading "/". */
  name: string;
  /** The reference it was created from. */
  image: string;
  /** The id of the image it runs ("sha256:…"). */
  imageId: string;
  labels: Readonly<Record<string, string>>;
  /** When the engine created it (ISO 8601). */
  createdAt: string;
  /** Its IPv4 address on each network it is attached to, by network name ("bridge"). */
  addresses?: Readonly<Record<string, string>> | undefined;
  state: ContainerState;
}

/** One container as `list` sees it. */
export interface ContainerSummary {
  id: string;
  /** Without Docker's leading "/". */
  name: string;
  image: string;
  imageId: string;
  labels: Readonly<Record<string, string>>;
  status: ContainerStatus;
  /** When the engine created it (ms since the epoch). */
  createdAtMs: number;
  /** What it mounts, whatever its state: how cordon tells whether a support volume is in use. */
  mounts: readonly ContainerMountSummary[];
}

/** One mount of a listed container. */
export interface ContainerMountSummary {
  /** "volume", "bind", "tmpfs", … */
  type: string;
  /** A volume's name; absent for other types. */
  name?: string | undefined;
  /** A bind's path on the engine's host (a volume's: its mountpoint). */
  source: string;
}

export interface ContainerFilter {
  /** `key` (has the label) or `key=value`; every entry must match. */
  labels: string[];
  /** Only running containers (default: every state). */
  runningOnly?: boolean | undefined;
}

/**
 * The body of the Engine API's container create, in the API's own field names: this is the
 * request cordon's hardening is written as (container-options.ts), checked field by field by
 * the tests and shown by `explain`. Declared here, not borrowed from dockerode, with only the
 * fields cordon sets.
 */
export interface CreateContainerRequest {
  name?: string;
  Image: string;
  User?: string;
  WorkingDir?: string;
  /** `NAME=value` */
  Env?: string[];
  Entrypoint?: string[];
  Cmd?: string[];
  Labels?: Record<string, string>;
  Tty?: boolean;
  /** Skips the engine's network setup altogether (with NetworkMode "none"). */
  NetworkDisabled?: boolean;
  HostConfig: ContainerHostConfig;
}

/** A running container's resource use (`docker stats`). */
export interface ContainerStats {
  /** Share of one CPU over the engine's sample: 100 = one core busy, up to cores × 100. */
  cpuPercent: number;
  /** Memory in use, page cache left out as `docker stats` leaves it (bytes). */
  memoryBytes: number;
  /** Its memory limit (bytes); the host's memory when it has none. */
  memoryLimitBytes: number;
}

export interface ContainerHostConfig {
  NetworkMode?: string;
  ReadonlyRootfs?: boolean;
  /** Mount point → mount options. */
  Tmpfs?: Record<string, string>;
  CapDrop?: string[];
  /** Capabilities given back after `CapDrop` (a measuring container's CAP_DAC_READ_SEARCH). */
  CapAdd?: string[];
  SecurityOpt?: string[];
  Init?: boolean;
  Privileged?: boolean;
  /** Bytes. */
  Memory?: number;
  /** Bytes, memory plus swap. */
  MemorySwap?: number;
  /** CPUs × 10⁹. */
  NanoCpus?: number;
  PidsLimit?: number;
  Ulimits?: { Name: string; Soft: number; Hard: number }[];
  Mounts?: (BindMount | VolumeMount)[];
  Dns?: string[];
  /** `host:address` */
  ExtraHosts?: string[];
  LogConfig?: { Type: string; Config: Record<string, string> };
  Runtime?: string;
  AutoRemove?: boolean;
}

export interface BindMount {
  Type: "bind";
  Source: string;
  Target: string;
  ReadOnly: boolean;
}

/**
 * A named volume on the engine: a private copy that lives with the engine (workspace-volumes.ts),
 * the executor binary and hosts files (support-volumes.ts).
 */
export interface VolumeMount {
  Type: "volume";
  /** The volume's name. */
  Source: string;
  Target: string;
  ReadOnly: boolean;
}

export interface ExecStartRequest {
  cmd: string[];
  /** "uid:gid" or a user name. */
  user: string;
  /** Default "/". */
  workingDir?: string | undefined;
  /** Extra environment (`NAME=value`) on top of the container's. */
  env?: string[] | undefined;
  /** Whether the process gets a stdin (the connection's writes; its end is end-of-file). */
  attachStdin: boolean;
  /** A pseudo-terminal: output arrives raw, as one stream. */
  tty?: boolean | undefined;
}

export interface ExecStatus {
  running: boolean;
  /** null until the engine has recorded the exit. */
  exitCode: number | null;
}

/** A process started by `exec`. */
export interface StartedExec {
  /**
   * The open connection: writes go to its stdin (`end()` is end-of-file), reads are its output,
   * in Docker's multiplexed frames (see DemuxStream) unless it has a TTY. Destroying it detaches;
   * the process keeps running.
   */
  stream: Duplex;
  /** How the process stands; the output can end a moment before the engine records the exit. */
  status(): Promise<ExecStatus>;
  /** Tells its pseudo-terminal the new size; a no-op once it has ended. */
  resize(size: { rows: number; columns: number }): Promise<void>;
}
