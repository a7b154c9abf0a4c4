/**
 * What the sandbox layer needs to create or reuse a container: the policy layer computes it
 * (`planRun().sandbox`, pure), the `SandboxManager` consumes it. Everything here is already
 * validated and resolved: absolute host paths, bytes, defaults applied.
 */

export type SandboxMode = "off" | "non-main" | "all";
export type SandboxScope = "session" | "agent" | "shared";
export type WorkspaceAccess = "none" | "ro" | "rw";

/** One bind mount. Sources are absolute host paths, validated by the policy layer. */
export interface MountSpec {
  /** Absolute host path. */
  source: string;
  /** Absolute path inside the container. */
  target: string;
  readOnly: boolean;
  /**
   * What it is, for `explain` and `sandbox list`. `git-dir`: the real repository's `.git`,
   * read-only over the read-write workspace (`sandbox.protectGitDir`).
   */
  role: "workspace" | "agent-workspace" | "git-dir" | "bind" | "ca-certificates";
}

export interface UlimitSpec {
  name: string;
  soft: number;
  hard: number;
}

/**
 * A sandbox image cordon builds from the project (`sandbox.docker.dockerfile` or
 * `sandbox.docker.devcontainer`, docs/images.md), tagged `cordon-project-<slug>:<hash of inputs>`.
 * Paths are absolute host paths the policy layer checked to lie inside the workspace; the builder
 * reads them without following links.
 */
export interface ProjectImageSpec {
  /** Which key asked for it: a Dockerfile, or a devcontainer.json that names an image or one. */
  source: "dockerfile" | "devcontainer";
  /** The config key, for messages: `agents.defaults.sandbox.docker.dockerfile`. */
  configKey: string;
  /** Absolute path of the Dockerfile or devcontainer.json. */
  file: string;
  /** The agent workspace: nothing outside it is read or sent to the engine. */
  workspace: string;
  /** Absolute build context (dockerfile only; a devcontainer.json names its own). */
  context?: string | undefined;
  /** Build arguments (dockerfile only). */
  args?: Record<string, string> | undefined;
}

/**
 * The image a sandbox runs, decided once by the policy, first match wins: the config's
 * (`sandbox.docker.image`: looked up, never pulled or built by cordon), the project's own (built
 * from its Dockerfile or devcontainer.json when its inputs change), the run's agent runtime's
 * (cordon's image with the agent CLI added, `cordon-agent-<name>:<hash>`, built when missing),
 * else cordon's built-in one (`cordon-sandbox:<hash>`, built when missing). The Docker layer
 * builds or looks up exactly this.
 */
export type SandboxImageSpec =
  | { source: "config"; reference: string; configKey: string }
  | { source: "project"; project: ProjectImageSpec }
  | { source: "runtime"; runtime: "claude-code" }
  | { source: "builtin" };

/** Container settings (the `sandbox.docker` config section, resolved). */
export interface DockerSettings {
  image: SandboxImageSpec;
  /** Container name prefix. Default "cordon". */
  containerPrefix: string;
  /** Working directory inside the container. Default "/workspace". */
  workdir: string;
  readOnlyRoot: boolean;
  /**
   * Mount point → tmpfs options, always saying `exec` or `noexec` (e.g. "/tmp" →
   * "rw,nosuid,nodev,exec,size=256m"): what the engine mounts, as `explain` shows it.
   */
  tmpfs: Record<string, string>;
  /** "none" (default), "bridge", or a named network; host / container:* only when allowed. */
  network: string;
  /** "uid:gid" every command and file operation runs as (the agent's). Default "1000:1000". */
  user: string;
  /**
   * "uid:gid" of the container's own processes, init (pid 1) and the keep-alive: never `user`,
   * so nothing the agent runs can ptrace, read the memory of or signal them (`initUserFor`).
   */
  initUser: string;
  /** Capabilities dropped; default ["ALL"]. */
  capDrop: string[];
  /** Environment inside the container: only what the config declares. */
  env: Record<string, string>;
  /** Memory limit in bytes. */
  memoryBytes: number;
  /** Memory + swap limit in bytes; equal to memoryBytes = no swap. */
  memorySwapBytes: number;
  /** CPU limit in cores (e.g. 1.5). */
  cpus: number;
  pidsLimit: number;
  ulimits: UlimitSpec[];
  /** Seccomp profile path or "default"; "unconfined" only when dangerous settings are allowed. */
  seccompProfile?: string | undefined;
  apparmorProfile?: string | undefined;
  dns: string[];
  /** "host:ip" entries. */
  extraHosts: string[];
  /**
   * How calls reach the container: "resident" (an executor binary mounted read-only into the
   * container, started once, fed frames) or "exec" (one Docker exec per call). Undefined: exec.
   */
  executor?: "resident" | "exec" | undefined;
  /** e.g. "runsc" for gVisor; undefined = the engine's default runtime. */
  runtime?: string | undefined;
}

/**
 * Network by allowlist (`sandbox.egress`, docs/network.md): the sandbox has no network (loopback
 * only); its one way out is its own egress proxy, which admits HTTP and HTTPS CONNECT to the
 * allowed hosts only, reached through a port cordon forwards to 127.0.0.1 in the sandbox over
 * the executor's stream. The proxy is named after the container, so the policy layer decides it
 * and the manager only makes it exist.
 */
export interface EgressSpec {
  /** Host patterns the proxy admits, lowercase: "registry.npmjs.org", "*.pythonhosted.org". */
  allow: string[];
  /** The proxy container, on the default bridge. */
  proxyContainer: string;
  /** Where squid listens in its container, and the forwarded port on 127.0.0.1 in the sandbox. */
  proxyPort: number;
}

/** A sandbox the manager should provide: which container, built how, with which mounts. */
export interface SandboxSpec {
  scope: SandboxScope;
  /**
   * Key that decides container sharing: "session:<sessionKey>", "agent:<agentId>" or "shared",
   * then "@" and a hash of the agent workspace's real path: sandboxes are never shared across projects.
   */
  scopeKey: string;
  /** Stable, collision-free, Docker-safe: `<prefix>-<slug>-<hash>`. */
  containerName: string;
  agentId: string;
  sessionKey: string;
  workspaceAccess: WorkspaceAccess;
  /** Absolute host path of the agent's workspace (never shown to the model). */
  agentWorkspace: string;
  /**
   * For access none/ro: absolute host path of this scope's private workspace directory (under the
   * state directory); undefined for rw.
   */
  privateWorkspace?: string | undefined;
  /**
   * Where the private workspace lives (`sandbox.workspaceStorage`): "host" at `privateWorkspace`,
   * bound into the container; "volume" in Docker volumes on the engine, `privateWorkspace` then
   * only naming it (docker/workspace-volumes.ts); "auto" host on an engine that shares this host's
   * filesystem, volume on any other. Undefined: "auto".
   */
  workspaceStorage?: "auto" | "host" | "volume" | undefined;
  /**
   * Size in bytes of the filesystem image the private workspace lives in (`sandbox.disk`): the
   * sandbox cannot write more to it. Undefined = unbounded (a plain directory).
   */
  diskBytes?: number | undefined;
  /** Seed the private workspace with a copy of the agent workspace when it is first created. */
  seed: boolean;
  /**
   * Paths of the agent workspace (relative, `/`-separated, none inside another) copied into a new
   * seeded copy besides what git lists (`sandbox.carry`, `--carry`): writable there, left out of
   * every diff. Undefined or empty: nothing is carried.
   */
  carry?: readonly string[] | undefined;
  /**
   * Sandboxes planned with the same key (one fix-tests run's work and verify copies) copy the
   * carried trees once: into a snapshot no container ever sees, mounted in each copy as the
   * read-only lower layer of an overlay with a private upper one (carry-layers.ts). Without a key a
   * copy layers over a snapshot of its own. Where the host cannot mount overlays (cordon not root)
   * each copy gets its own copy of the carried trees.
   */
  carryShare?: string | undefined;
  /**
   * Secret-shaped paths of the agent workspace seeded all the same (`sandbox.seedInclude`,
   * workspace-relative; a directory includes what is below it). Every other secret-shaped path
   * is left out of the seed (workspace/secret-paths.ts).
   */
  seedInclude?: readonly string[] | undefined;
  /** All bind mounts, workspace ones included, in mount order. */
  mounts: MountSpec[];
  docker: DockerSettings;
  /** Network by allowlist; undefined = only what `docker.network` gives (none by default). */
  egress?: EgressSpec | undefined;
  /** Hash of everything above that shapes the container (key order ignored). */
  configHash: string;
}
