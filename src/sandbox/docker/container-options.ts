import path from "node:path";

import { SandboxStartError } from "../../common/index.js";
import type { SandboxSpec, UlimitSpec } from "../spec.js";
import type {
  BindMount,
  ContainerHostConfig,
  CreateContainerRequest,
  VolumeMount,
} from "./client/index.js";
import { gvisorProcessLimits, isGvisorRuntime } from "./gvisor.js";
import { hostsMountTarget, hostsVolumeTarget, type HostsFile } from "./hosts-file.js";
import { executorContainerDirectory } from "./resident/executor-binary.js";

/** Labels on every container cordon creates; Docker is the source of truth for what exists. */
export const labelKeys = {
  managed: "cordon.managed",
  scope: "cordon.scope",
  scopeKey: "cordon.scope-key",
  agent: "cordon.agent",
  session: "cordon.session",
  configHash: "cordon.config-hash",
  image: "cordon.image",
  createdAt: "cordon.created-at",
  workspaceAccess: "cordon.workspace-access",
  /** The agent workspace's real host path: the project this sandbox belongs to. */
  workspace: "cordon.workspace",
  /** Host path of the private workspace (access none/ro), so prune can find it by label. */
  privateWorkspace: "cordon.private-workspace",
  /** The state directory (CORDON_HOME) whose manager created it; list and prune stay in it. */
  home: "cordon.home",
  /**
   * The shape of a pool member (pool/pool-shape.ts): set on containers made for a warm pool, and
   * kept when one is taken (its record then says whose it is: container-identity.ts).
   */
  pool: "cordon.pool",
} as const;

export interface ContainerOptionsInput {
  spec: SandboxSpec;
  /** The resolved image reference (the built-in image's hashed tag when spec.docker.image is unset). */
  image: string;
  /** ISO time; passed in so the function stays deterministic. */
  createdAt: string;
  /** Extra labels (tests mark their containers). */
  extraLabels?: Record<string, string> | undefined;
  /** The state directory of the manager creating it (the `cordon.home` label). */
  stateDirectory?: string | undefined;
  /**
   * A hosts file to mount read-only at /etc/hosts: the one in its support volume
   * (`SupportVolumes`, `hostsFileContent`), so it travels with the engine.
   * With network "none" it lets the container skip Docker's network setup (`NetworkDisabled`);
   * without it the engine sets up the empty namespace and writes /etc/hosts itself, about 110 ms
   * slower to start.
   */
  hostsFile?: HostsFile | undefined;
  /** The content of `spec.docker.seccompProfile` (see `readSeccompProfile`); the API wants JSON. */
  seccompProfileJson?: string | undefined;
  /**
   * The engine's volume holding the resident executor binary (`SupportVolumes`), mounted
   * read-only at /.cordon when spec.docker.executor is "resident"; none, no mount (every call
   * goes by plain exec).
   */
  executorVolume?: string | undefined;
  /**
   * The support volume holding the host's CA bundle (`ensureCaCertificatesVolume`), mounted
   * read-only as the directory of the plan's "ca-certificates" mount target, in place of a bind of
   * the host's file: it travels with an engine elsewhere.
   */
  caCertificatesVolume?: string | undefined;
  /**
   * The private copy's volume (workspace-volumes.ts), mounted where the workspace bind would be:
   * set when the copy lives on the engine rather than at `spec.privateWorkspace`.
   */
  workspaceVolume?: VolumeMount | undefined;
}

/**
 * The hardened container of DESIGN.md §5, from a resolved spec: no network unless configured, a
 * read-only root with sized tmpfs, every capability dropped, no-new-privileges, an init process
 * that reaps zombies, non-root users (init and the keep-alive as `initUser`, out of the agent's
 * reach; commands as `user`), pids/memory/cpu limits, and only the declared environment.
 * No host namespace, no privileged mode, no Docker socket: nothing here can add them, and bind
 * sources were validated by the policy layer.
 */
export function createContainerOptions(input: ContainerOptionsInput): CreateContainerRequest {
  const { spec, image } = input;
  const docker = spec.docker;
  const securityOpt = ["no-new-privileges:true"];
  if (docker.seccompProfile && docker.seccompProfile !== "default") {
    if (input.seccompProfileJson === undefined) {
      throw new SandboxStartError(`the seccomp profile ${docker.seccompProfile} was not read`, {
        fix: "pass its content as seccompProfileJson (readSeccompProfile)",
      });
    }
    securityOpt.push(`seccomp=${input.seccompProfileJson}`);
  }
  if (docker.apparmorProfile) securityOpt.push(`apparmor=${docker.apparmorProfile}`);
  const ownHostsFile = docker.network === "none" && input.hostsFile !== undefined;
  // Under gVisor (any runtime but runc) a disabled network leaves loopback down ("Network is
  // unreachable" on 127.0.0.1): its netstack takes the interfaces libnetwork set up, and there
  // are none. Forwarded ports (the egress proxy, the model gateway) and a suite's local servers
  // need loopback, so there the engine makes its loopback-only namespace.
  const networkDisabled =
    ownHostsFile && (docker.runtime === undefined || docker.runtime === "runc");
  const mounts: (BindMount | VolumeMount)[] = spec.mounts.map((mount) => {
    if (mount.role === "workspace" && input.workspaceVolume) return input.workspaceVolume;
    if (mount.role === "ca-certificates" && input.caCertificatesVolume) {
      // The bundle is the volume's only file, named as the target's.
      return {
        Type: "volume" as const,
        Source: input.caCertificatesVolume,
        Target: path.posix.dirname(mount.target),
        ReadOnly: true,
      };
    }
    return {
      Type: "bind" as const,
      Source: mount.source,
      Target: mount.target,
      ReadOnly: mount.readOnly,
    };
  });
  // Docker 20.10 leaves /etc/hosts empty under network "none" either way: cordon's carries
  // `localhost`.
  if (ownHostsFile && input.hostsFile) {
    mounts.push(
      { Type: "bind", Source: input.hostsFile.path, Target: hostsMountTarget, ReadOnly: true },
      // So the engine counts the volume as used (`hostsVolumeTarget`).
      { Type: "volume", Source: input.hostsFile.volume, Target: hostsVolumeTarget, ReadOnly: true },
    );
  }
  mounts.push(...executorMounts(input));

  const hostConfig: ContainerHostConfig = {
    NetworkMode: docker.network,
    ReadonlyRootfs: docker.readOnlyRoot,
    Tmpfs: { ...docker.tmpfs },
    CapDrop: [...docker.capDrop],
    SecurityOpt: securityOpt,
    Init: true,
    Privileged: false,
    Memory: docker.memoryBytes,
    MemorySwap: docker.memorySwapBytes,
    NanoCpus: Math.round(docker.cpus * 1e9),
    ...processLimits(docker.pidsLimit, docker.ulimits, docker.runtime),
    Mounts: mounts,
    Dns: [...docker.dns],
    // Dropped by the engine when the network is disabled: the hosts file carries them then.
    ExtraHosts: [...docker.extraHosts],
    // Logs of `sleep infinity` are empty; a bounded driver keeps a chatty process from filling disk.
    LogConfig: { Type: "json-file", Config: { "max-size": "1m", "max-file": "1" } },
  };
  if (docker.runtime) hostConfig.Runtime = docker.runtime;

  return {
    name: spec.containerName,
    Image: image,
    // Init and the keep-alive run as a uid of their own: every exec names the agent's (`user`).
    User: docker.initUser,
    WorkingDir: docker.workdir,
    Env: Object.entries(docker.env).map(([key, value]) => `${key}=${value}`),
    // The container only idles; every command arrives through exec.
    Entrypoint: ["sleep"],
    Cmd: ["infinity"],
    Labels: {
      ...input.extraLabels,
      [labelKeys.managed]: "true",
      [labelKeys.scope]: spec.scope,
      [labelKeys.scopeKey]: spec.scopeKey,
      [labelKeys.agent]: spec.agentId,
      [labelKeys.session]: spec.sessionKey,
      [labelKeys.configHash]: spec.configHash,
      [labelKeys.image]: image,
      [labelKeys.createdAt]: input.createdAt,
      [labelKeys.workspaceAccess]: spec.workspaceAccess,
      [labelKeys.workspace]: spec.agentWorkspace,
      ...(spec.privateWorkspace ? { [labelKeys.privateWorkspace]: spec.privateWorkspace } : {}),
      ...(input.stateDirectory ? { [labelKeys.home]: input.stateDirectory } : {}),
    },
    // NetworkMode "none" alone isolates (a namespace with only loopback); NetworkDisabled also
    // skips libnetwork, so the container starts faster, but leaves /etc/hosts empty: only with
    // cordon's own hosts file mounted, or `localhost` would not resolve for a suite's local server.
    NetworkDisabled: networkDisabled,
    HostConfig: hostConfig,
  };
}

/** The resident executor, read-only: cordon's own binary, which nothing in the sandbox can replace. */
function executorMounts(input: ContainerOptionsInput): VolumeMount[] {
  if (input.spec.docker.executor !== "resident" || input.executorVolume === undefined) return [];
  return [
    {
      Type: "volume",
      Source: input.executorVolume,
      Target: executorContainerDirectory,
      ReadOnly: true,
    },
  ];
}

/**
 * The pids limit and ulimits. Under gVisor the pids limit becomes RLIMIT_NPROC inside the sandbox
 * with a larger host-side backstop (see `gvisorProcessLimits`): Docker's pids limit there counts
 * the sentry's threads, and reaching it kills the whole sandbox.
 */
function processLimits(
  pidsLimit: number,
  ulimits: readonly UlimitSpec[],
  runtime: string | undefined,
): Required<Pick<ContainerHostConfig, "PidsLimit" | "Ulimits">> {
  const toDocker = (u: UlimitSpec) => ({ Name: u.name, Soft: u.soft, Hard: u.hard });
  if (!isGvisorRuntime(runtime)) return { PidsLimit: pidsLimit, Ulimits: ulimits.map(toDocker) };
  const limits = gvisorProcessLimits(
    pidsLimit,
    ulimits.find((u) => u.name === "nproc"),
  );
  return {
    PidsLimit: limits.hostPidsLimit,
    Ulimits: [
      ...ulimits.filter((u) => u.name !== "nproc").map(toDocker),
      { Name: "nproc", Soft: limits.nproc.soft, Hard: limits.nproc.hard },
    ],
  };
}
