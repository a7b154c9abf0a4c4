import { stat } from "node:fs/promises";
import path from "node:path";

import type { SandboxError } from "../../common/index.js";
import {
  ConfigError,
  SandboxStartError,
  createSilentLogger,
  throwIfAborted,
  type Logger,
} from "../../common/index.js";
import type { SandboxLease } from "../lease.js";
import type { Sandbox } from "../sandbox.js";
import type { SandboxSpec } from "../spec.js";
import {
  assertHasBaseline,
  baselineGitDir,
  checkAgentWorkspaceAccess,
  forkBaseline,
  DiskWatchdog,
  describeCarry,
  ensurePrivateWorkspace,
  type SeedInfo,
  type TreePair,
} from "../workspace/index.js";
import type { ContainerClient, ContainerDetails } from "./client/index.js";
import { createContainerOptions, labelKeys } from "./container-options.js";
import { readSeccompProfile } from "./seccomp-profile.js";
import { ensureHostsFile } from "./hosts-file.js";
import { ensureCaCertificatesVolume } from "./ca-certificates.js";
import { ensureExecutorVolume, residentExecutorBinary } from "./resident/executor-binary.js";
import { SupportVolumes } from "./support-volumes.js";
import { DockerSandbox } from "./docker-sandbox.js";
import type { DockerEngine } from "./engine.js";
import { remoteEngineRefusal } from "./engine-filesystem.js";
import {
  ensureWorkspaceVolumes,
  makeForkVolumes,
  usesWorkspaceVolumes,
  workspaceVolumeMount,
  workspaceVolumeNames,
} from "./workspace-volumes.js";
import { workspaceUsage, type MeasuredCopy } from "./workspace-usage.js";
import { SandboxInventory } from "./inventory.js";
import { ImageResolver, type ResolvedImage } from "./manager-image.js";
import { KeyedLock } from "./manager-lock.js";
import { assertAdoptable, settleContainer, type Settled } from "./settle-container.js";
import { SandboxRecords } from "./records.js";
import { stopIdleSandboxes, type SandboxHolders } from "./idle-stop.js";
import { assertWorkspaceWritable, hostPermissionsHold } from "./workspace-probe.js";
import type { SandboxImageOptions } from "./sandbox-image.js";
import { EgressProxies, type EgressDecision, type UpstreamProxy } from "./egress/index.js";
import { whileFrozen } from "./freeze-container.js";
import type { SandboxQuiet } from "./sandbox-quiet.js";
import { commandsRunning } from "./container-activity.js";
import { labelsOf } from "./container-identity.js";
import { poolMemberSpec, poolShape, unpoolableReason } from "./pool/pool-shape.js";
import { WarmPool } from "./pool/warm-pool.js";
import {
  ForkTargetExistsError,
  assertForkable,
  assertNoForkTarget,
  copyIntoFork,
} from "./fork-workspace.js";
import {
  WorkspaceInspectors,
  dockerWorkspaceChanges,
  dockerWorkspaceCheckpoints,
  type DockerWorkspaceChanges,
  type DockerWorkspaceCheckpoints,
  type InspectedWorkspace,
} from "./inspector/index.js";

/** A running container the manager hands to `createSandbox`. */
export interface ManagedContainer {
  containerId: string;
  containerName: string;
  /** Working directory inside the container (spec.docker.workdir). */
  workdir: string;
  /** "uid:gid" commands run as (spec.docker.user). */
  user: string;
  spec: SandboxSpec;
  /**
   * For a sandbox whose container went away mid-session (killed, OOM, daemon restart): replaces
   * it as an acquire would (a fresh container, the same private workspace) and returns the new
   * container id; returns the current id when it is still running.
   */
  recover: (options?: { signal?: AbortSignal | undefined }) => Promise<string>;
  /** Why the manager stopped this container on purpose (its disk budget), if it did. */
  stopReason: () => SandboxError | undefined;
}

export type AcquirePhase = "image" | "workspace" | "pool" | "create" | "start" | "reuse" | "wait";

export interface AcquireProgress {
  phase: AcquirePhase;
  message: string;
}

export interface AcquireOptions {
  signal?: AbortSignal | undefined;
  onProgress?: ((event: AcquireProgress) => void) | undefined;
  /** Prune limits for this acquire (the plan's `sandbox.prune`); default: the manager's `prune`. */
  prune?: AutoPruneOptions | undefined;
  /** Each request the sandbox's egress proxy admits or refuses while this lease is held. */
  onEgress?: ((decision: EgressDecision) => void) | undefined;
  /**
   * The warm pool for sandboxes of this spec's shape (the plan's `sandbox.pool`, docs/pool.md):
   * a new sandbox takes a waiting container, and the pool is refilled in the background (`flush`
   * waits for it). Size 0 or unset: no pool.
   */
  pool?: { size: number } | undefined;
  /**
   * The caller will read the private copy's changes (`lease.changes`): an inspector is started
   * while the rest of the acquire runs, so the first reading does not wait for one.
   */
  readsChanges?: boolean | undefined;
}

/** The manager's lease: a `SandboxLease` that can always freeze, with its container's name. */
export interface DockerSandboxLease extends SandboxLease {
  containerName: string;
  /**
   * True when the container was made from another config (or image) than the spec asks for and
   * was kept because it is busy; it is recreated on an acquire once it is idle.
   */
  stale: boolean;
  warnings: string[];
  freeze<T>(fn: () => Promise<T>): Promise<T>;
}

export interface DockerSandboxManagerOptions {
  engine: DockerEngine;
  /** The state directory (CORDON_HOME): private workspaces and sandbox records live under it. */
  stateDirectory: string;
  logger?: Logger | undefined;
  /** The built-in image to use when spec.docker.image is unset (default: computed and built). */
  image?: string | undefined;
  /** How to build the built-in image when it is missing. */
  imageOptions?: SandboxImageOptions | undefined;
  /** The host's own proxy, which egress proxies go through (`upstreamProxyFromEnv`). */
  upstreamProxy?: UpstreamProxy | undefined;
  /** Extra labels on every container created (tests mark theirs). */
  extraLabels?: Record<string, string> | undefined;
  /**
   * Wraps a running container in the `Sandbox` tools talk to (`DockerSandbox.attach`: with its
   * forwarded ports listening); a failure fails the acquire.
   */
  createSandbox: (container: ManagedContainer) => Sandbox | Promise<Sandbox>;
  /**
   * Prune after acquires (DESIGN.md §5), in the background, at most once per `everyMs`
   * (default 5 minutes): sandboxes idle or older than the limits go, with their private
   * workspaces, and so do orphaned workspaces unused for the idle limit. Sandboxes this manager
   * holds, and stopped ones within the limits, are kept. Unset: no automatic prune.
   */
  prune?: AutoPruneOptions | undefined;
  /**
   * What live runs of other processes hold (their session locks): sandboxes an automatic idle
   * stop or prune must leave alone though their records look idle. Asked once per sweep.
   */
  holders?: (() => Promise<SandboxHolders>) | undefined;
  /**
   * How often the records of held sandboxes are marked used (ms, default 60 000), so a prune in
   * another process never takes a long-held sandbox for an idle one.
   */
  heartbeatMs?: number | undefined;
  /**
   * How often (ms) a held sandbox's private workspace is measured where sandbox.disk cannot be
   * a bounded filesystem (see DiskWatchdog). Default 10 s.
   */
  diskWatchdogMs?: number | undefined;
}

export interface AutoPruneOptions {
  /** Stop (not remove) running sandboxes unused for longer than this (ms); 0 or unset = never. */
  stopIdleMs?: number | undefined;
  /** Unused for longer than this (ms); 0 or unset = no idle limit. */
  idleMs?: number | undefined;
  /** Created longer ago than this (ms); 0 or unset = no age limit. */
  maxAgeMs?: number | undefined;
  /** Minimum time between two automatic prunes (ms). Default 300 000. */
  everyMs?: number | undefined;
}

/**
 * Maps a scope key to a running, hardened container (DESIGN.md §5). Docker is the source of
 * truth: every acquire inspects the container by its name and decides from its labels and state
 * whether to reuse, start, recreate or refuse it.
 *
 * - Reuse: labels say cordon made it for this scope key, in this state directory, from this
 *   config hash and image, and it is running.
 * - Never adopt: a container with the expected name that cordon did not create, or made for
 *   another scope or state directory, is refused (and never removed).
 * - Drift: another config hash or image recreates an idle container; one held by this process
 *   or running commands is kept and reported stale.
 * - A container that was stopped (`docker stop`, an engine restart) is started again; one that
 *   died (killed, OOM) is replaced by a fresh one. The private workspace stays either way.
 * - Concurrent acquires of one key in this process are serialised; across processes a name
 *   conflict (409) means someone else created it, and it is inspected again.
 */
export class DockerSandboxManager {
  private readonly engine: DockerEngine;
  private readonly stateDirectory: string;
  private readonly logger: Logger;
  private readonly extraLabels: Record<string, string>;
  private readonly createSandbox: (container: ManagedContainer) => Sandbox | Promise<Sandbox>;
  private readonly images: ImageResolver;
  private readonly records: SandboxRecords;
  private readonly containers: ContainerClient;
  private readonly locks = new KeyedLock();
  private readonly holders = new Map<string, number>();
  private readonly inventory: SandboxInventory;
  private readonly egress: EgressProxies;
  private readonly inspectors: WorkspaceInspectors;
  private readonly autoPrune: AutoPruneOptions | undefined;
  private readonly liveRunHolders: (() => Promise<SandboxHolders>) | undefined;
  private readonly heartbeatMs: number;
  private readonly diskWatchdogMs: number | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private lastPruneAt = 0;
  private readonly background = new Set<Promise<void>>();
  private readonly pool: WarmPool;
  /** The executor binary and hosts files, as volumes on the engine. */
  private readonly support: SupportVolumes;
  /** Shapes whose pool this process is refilling now. */
  private readonly refilling = new Set<string>();
  /** Whether host permission bits hold inside this engine's containers (asked once). */
  private hostPermissions: Promise<boolean> | undefined;

  constructor(options: DockerSandboxManagerOptions) {
    this.engine = options.engine;
    this.stateDirectory = path.resolve(options.stateDirectory);
    this.logger = options.logger ?? createSilentLogger();
    this.extraLabels = { ...options.extraLabels };
    this.createSandbox = options.createSandbox;
    this.images = new ImageResolver({
      engine: options.engine,
      stateDirectory: this.stateDirectory,
      builtinImage: options.image,
      imageOptions: {
        logDirectory: path.join(this.stateDirectory, "logs"),
        ...options.imageOptions,
      },
    });
    this.records = new SandboxRecords(this.stateDirectory);
    this.containers = options.engine.containers;
    this.support = new SupportVolumes(options.engine);
    this.inventory = new SandboxInventory({
      engine: options.engine,
      stateDirectory: this.stateDirectory,
      logger: this.logger,
      image: options.image,
      imageOptions: options.imageOptions,
    });
    this.egress = new EgressProxies({
      engine: options.engine,
      stateDirectory: this.stateDirectory,
      upstream: options.upstreamProxy,
      imageOptions: { baseImage: options.imageOptions?.baseImage },
      logger: this.logger,
    });
    this.inspectors = new WorkspaceInspectors({
      containers: this.containers,
      // A recorder mounts the executor's support volume, which a prune may remove meanwhile.
      create: (request) => this.support.createContainer(request),
      logger: this.logger,
    });
    this.pool = new WarmPool({
      containers: this.containers,
      records: this.records,
      stateDirectory: this.stateDirectory,
      discard: async (name) => {
        // A pool member's copy was never handed to an agent: nothing of anyone's to keep.
        await this.inventory.remove(name, { discardChanges: true });
      },
      later: (work) => this.inBackground("warm pool", work),
      logger: this.logger,
    });
    this.autoPrune = options.prune;
    this.liveRunHolders = options.holders;
    this.heartbeatMs = options.heartbeatMs ?? 60_000;
    this.diskWatchdogMs = options.diskWatchdogMs;
  }

  /** How many leases of `containerName` this process holds. */
  holderCount(containerName: string): number {
    return this.holders.get(containerName) ?? 0;
  }

  /** Runs `work` after the caller moved on; `flush` waits for it, and a failure is only logged. */
  private inBackground(what: string, work: () => Promise<void>): void {
    const done: Promise<void> = work()
      .catch((error: unknown) =>
        this.logger.warn({ err: error }, `${what}: background work failed`),
      )
      .finally(() => this.background.delete(done));
    this.background.add(done);
  }

  /** Resolves when background work (an automatic prune) has finished; for tests and shutdown. */
  async flush(): Promise<void> {
    while (this.background.size > 0) await Promise.all(this.background);
  }

  acquire(spec: SandboxSpec, options: AcquireOptions = {}): Promise<DockerSandboxLease> {
    return this.acquireAs(spec, options, undefined);
  }

  /**
   * Makes `target`'s sandbox a fork of `source`'s and acquires it: its private copy starts as
   * `source`'s is now (every file — ignored ones, the copy's own `.git`, modes — copied by a
   * throwaway inspector container with `source` frozen; never by the host), its baseline is
   * `source`'s (so its diff shows every change since the repository, and `cordon apply` from it
   * writes to the same one), and it gets a container of its own — a warm pool member when
   * `options.pool` has one waiting. `source` need not be held; a run may be using it (the copy
   * is one state, as a checkpoint is). The fork starts with no checkpoints.
   *
   * `target` must have nothing yet (no container, record or private copy):
   * `ForkTargetExistsError` (exit 2) otherwise, and nothing is touched. Any other failure
   * removes what the fork made (container, copy, baseline) before it is rethrown.
   */
  async fork(
    source: SandboxSpec,
    target: SandboxSpec,
    options: AcquireOptions = {},
  ): Promise<DockerSandboxLease> {
    assertForkable(source, target);
    if (this.usesVolumes(source) !== this.usesVolumes(target)) {
      const where = (spec: SandboxSpec): string =>
        this.usesVolumes(spec) ? "in Docker volumes on the engine" : "on this host";
      throw new ConfigError(
        `${source.containerName} keeps its private copy ${where(source)}, and its fork would keep its ${where(target)}`,
        { fix: "fork with the same sandbox.workspaceStorage as the parent session" },
      );
    }
    const fork = { source, made: false };
    try {
      return await this.acquireAs(target, options, undefined, fork);
    } catch (error) {
      if (fork.made) {
        await this.discardFork(target).catch((cleanup: unknown) => {
          this.logger.warn(
            { err: cleanup, sandbox: target.containerName },
            "cannot remove a failed fork",
          );
        });
      }
      throw error;
    }
  }

  /** Removes what a failed fork made: its container and record, or its copy alone. */
  private async discardFork(target: SandboxSpec): Promise<void> {
    if (await this.inventory.exists(target.containerName)) {
      await this.inventory.remove(target.containerName, { discardChanges: true });
    } else if (target.privateWorkspace) {
      await this.inventory.discardCopy(target.privateWorkspace);
    }
  }

  /**
   * The fork's private copy, filled from its parent's: a pool member's copy (`taken`) is
   * emptied and refilled, otherwise an empty one is made (a directory, or a disk image of the
   * fork's budget). Sets `fork.made` once there is something of the fork's to remove on failure.
   */
  private async makeFork(
    fork: { source: SandboxSpec; made: boolean },
    target: SandboxSpec,
    image: ResolvedImage,
    context: {
      taken: boolean;
      signal: AbortSignal | undefined;
      progress: (phase: AcquirePhase, message: string) => void;
      warn: (message: string) => void;
    },
  ): Promise<void> {
    const from = fork.source.privateWorkspace ?? "";
    const to = target.privateWorkspace ?? "";
    const source = this.inspectedWorkspace(fork.source, image.reference);
    if (!source) throw new SandboxStartError(`${fork.source.containerName} has no private copy`);
    await assertHasBaseline(from);
    const volumes = source.volumes !== undefined;
    if (context.taken) {
      fork.made = true;
    } else if (volumes) {
      // Its volumes: the workspace empty, the parent's baseline copied engine to engine.
      const made = await makeForkVolumes(fork.source, target, {
        containers: this.containers,
        volumes: this.engine.volumes,
        stateDirectory: this.stateDirectory,
        image: image.reference,
      });
      if (!made) {
        throw new ForkTargetExistsError(
          `the volumes of ${target.containerName} exist already: a fork never replaces them`,
          { fix: "fork under another name, or remove that sandbox first (`cordon sandbox rm`)" },
        );
      }
      fork.made = true;
    } else {
      const made = await ensurePrivateWorkspace(
        { ...target, seed: false },
        { stateDirectory: this.stateDirectory, signal: context.signal },
      );
      if (!made.created) {
        throw new ForkTargetExistsError(
          `the sandbox ${target.containerName} was made by another process meanwhile: a fork never replaces one`,
          { fix: "fork under another name" },
        );
      }
      fork.made = true;
      for (const warning of made.warnings) context.warn(warning);
    }
    // The baseline first, as a seed installs it: a copy in place has its baseline.
    await forkBaseline(from, to, { signal: context.signal });
    const into = volumes ? workspaceVolumeNames(target.containerName).workspace : to;
    context.progress("workspace", `copying ${source.volumes?.workspace ?? from} into ${into}`);
    await copyIntoFork({
      inspectors: this.inspectors,
      source,
      target: into,
      freeze: (fn) => this.freeze(fork.source, fn, (message) => context.progress("wait", message)),
      signal: context.signal,
    });
  }

  /** `acquire`, for a sandbox or (with `memberOf`, its pool shape) a new pool member. */
  private async acquireAs(
    spec: SandboxSpec,
    options: AcquireOptions,
    memberOf: string | undefined,
    fork?: { source: SandboxSpec; made: boolean },
  ): Promise<DockerSandboxLease> {
    const { signal } = options;
    const log = this.logger.child({ sandbox: spec.containerName, scopeKey: spec.scopeKey });
    const warnings: string[] = [];
    const progress = (phase: AcquirePhase, message: string): void => {
      log.debug({ phase }, message);
      options.onProgress?.({ phase, message });
    };
    // A warning reaches the user once: in the lease (the CLI prints the `sandbox-ready` event's
    // warnings), not also as a log line and a progress line.
    const warn = (message: string, phase: AcquirePhase = "workspace"): void => {
      warnings.push(message);
      log.debug({ phase }, message);
    };
    throwIfAborted(signal, "sandbox acquire");
    // Before anything is created (image, copy, proxy, container): an engine that cannot be
    // resolved, or one elsewhere, which cannot bind the workspace itself ("ro"/"rw"). (Its egress
    // proxy is no reason: cordon reaches squid through its container, not its network.)
    const refusal = remoteEngineRefusal(this.engine.endpoint(), spec);
    if (refusal) throw refusal;
    // Where the copy lives: decided once here (a "host" copy on a remote engine is refused).
    const volumes = this.usesVolumes(spec);

    // Asked while the image is resolved; never fails (an engine that does not answer says no).
    const hostPermissions = (this.hostPermissions ??= hostPermissionsHold(this.engine.system));
    // The image first: it is the first thing that talks to Docker, so a missing engine fails
    // here, before anything is written to disk.
    const image = await this.images.resolveFor(spec.docker, {
      signal,
      onOutput: (text) => progress("image", text),
    });
    for (const note of image.notes ?? []) warn(note, "image");

    // A pool hands a member's copy over by renaming host paths: not for a copy in volumes.
    const shape = volumes ? undefined : this.poolShapeFor(spec, options.pool, log);
    // A freeze of this lease (a diff, a checkpoint, a rollback) that waits behind another
    // command's says so where this acquire's progress goes: the user sees why nothing happens.
    const freeze = <T>(fn: () => Promise<T>): Promise<T> =>
      this.freeze(spec, fn, (message) => progress("wait", message));
    const changes = this.workspaceChanges(spec, image.reference, freeze);
    // Asked before a turn's checkpoint whether it may record without a pause (sandbox-quiet.ts).
    let attached: DockerSandbox | undefined;
    const checkpoints = this.workspaceCheckpoints(spec, image.reference, freeze, () =>
      attached ? attached.quiet() : Promise.resolve(undefined),
    );
    const acquiredAt = Date.now();
    let watchdog: DiskWatchdog | undefined;
    let taken = false;
    const settled = await this.locks
      .run(spec.containerName, async () => {
        throwIfAborted(signal, "sandbox acquire");
        if (fork) {
          await assertNoForkTarget(spec, {
            containerOrRecord: (name) => this.inventory.exists(name),
          });
        }
        if (shape) {
          taken = (await this.pool.take(spec, shape, image)) !== undefined;
          if (taken)
            progress("pool", `took a container from the warm pool as ${spec.containerName}`);
        }
        // Used from now on: an idle stop in another process reads the record again right before
        // stopping, and leaves this one running.
        await this.touchRecord(spec.containerName);
        if (fork) await this.makeFork(fork, spec, image, { taken, signal, progress, warn });
        // A member's copy is fingerprinted, so a take can tell whether it is still current.
        const prepared = await this.prepareWorkspace(spec, {
          signal,
          progress,
          warn,
          fingerprint: memberOf !== undefined,
          volumesImage: volumes ? image.reference : undefined,
        });
        let succeeded = false;
        try {
          // The caller reads the changes next (`cordon diff`): an inspector starts meanwhile.
          if (options.readsChanges) changes?.prepare();
          // A workspace already over a budget the kernel does not enforce: no sandbox starts on it.
          const measure = (copy: MeasuredCopy) => () =>
            workspaceUsage({
              containers: this.containers,
              copy,
              sandboxName: spec.containerName,
              stateDirectory: this.stateDirectory,
              image: image.reference,
            });
          const volume = volumes ? workspaceVolumeNames(spec.containerName).workspace : undefined;
          const directory =
            spec.workspaceAccess === "rw" || volumes ? undefined : spec.privateWorkspace;
          watchdog = await DiskWatchdog.for({
            workspace: directory ? { path: directory, bytes: measure({ directory }) } : undefined,
            diskBytes: spec.diskBytes,
            rootLayerBytes: spec.docker.readOnlyRoot
              ? undefined
              : () => this.containers.writableLayerBytes(spec.containerName),
            // Just seeded: what was streamed in bounds it, and no container measures it.
            volume: volume
              ? { name: volume, bytes: measure({ volume }), atMost: prepared.bytesAtMost }
              : undefined,
            containerName: spec.containerName,
            intervalMs: this.diskWatchdogMs,
          });
          await watchdog?.assertWithinBudget();
          const result = await this.settleContainer(spec, image, {
            signal,
            // A taken member is in use already: "reusing" it would tell the user something else.
            progress: taken
              ? (phase, message) =>
                  phase === "reuse" ? log.debug({ phase }, message) : progress(phase, message)
              : progress,
            log,
            memberOf,
          });
          // Before the lease exists, so no agent turn runs on a workspace it cannot write.
          await assertWorkspaceWritable(this.containers, result.container.id, spec, {
            hostPermissionsHold: await hostPermissions,
            madeInVolumes: prepared.madeInVolumes,
            signal,
          });
          // Counted inside the lock, so the next acquire of this key sees it held.
          this.hold(spec.containerName);
          succeeded = true;
          return result;
        } finally {
          const finish = prepared.finish;
          const finished = async (): Promise<void> => {
            const failed = await finish?.();
            if (failed) log.warn({ err: failed }, "cannot remove what seeding left behind");
          };
          // Started: the rest of seeding's cleanup goes on after this returns (`flush` waits).
          // Failed: done first, so the volumes it holds can be removed.
          if (finish && succeeded) this.inBackground("removing what seeding left behind", finished);
          else await finished();
        }
      })
      .catch(async (error: unknown) => {
        await Promise.all([changes?.dispose(), checkpoints?.dispose()]);
        throw error;
      });
    watchdog?.start((error) => {
      log.error({ err: error }, error.message);
      void this.containers.kill(spec.containerName).catch((killError: unknown) => {
        log.error({ err: killError }, "cannot stop a sandbox over its disk budget");
      });
    });
    const egress = spec.egress;
    const stopFollowing =
      egress && options.onEgress && !settled.stale
        ? this.egress.follow(egress, acquiredAt, options.onEgress)
        : undefined;
    let released = false;
    const release = async (): Promise<void> => {
      if (released) return;
      released = true;
      // Before the run ends: the proxy's last decisions are the run's events.
      await stopFollowing?.();
      watchdog?.stop();
      this.unhold(spec.containerName);
      attached?.release();
      await Promise.all([
        changes?.dispose(),
        checkpoints?.dispose(),
        this.touchRecord(spec.containerName),
      ]);
    };

    let sandbox: Sandbox;
    try {
      if (settled.stale) {
        warn(
          `${spec.containerName} runs an older config or image and is busy, so it was kept; it is recreated on an acquire once idle`,
          "reuse",
        );
      }
      await this.writeRecord(spec, image, settled.container, log);
      sandbox = await this.createSandbox({
        containerId: settled.container.id,
        containerName: spec.containerName,
        workdir: spec.docker.workdir,
        user: spec.docker.user,
        spec,
        stopReason: () => watchdog?.exceeded,
        recover: async (recoverOptions = {}) => {
          // A sandbox stopped for its disk budget stays stopped: the error says why.
          await watchdog?.assertWithinBudget();
          const again = await this.locks.run(spec.containerName, () =>
            this.settleContainer(spec, image, {
              signal: recoverOptions.signal,
              progress: (phase, message) => log.debug({ phase }, message),
              log,
            }),
          );
          if (again.container.id !== settled.container.id)
            await this.writeRecord(spec, image, again.container, log);
          return again.container.id;
        },
      });
      if (sandbox instanceof DockerSandbox) attached = sandbox;
    } catch (error) {
      await release();
      throw error;
    }
    this.maybePrune(options.prune ?? this.autoPrune);
    if (shape && options.pool) this.refillInBackground(spec, shape, image, options.pool.size);
    return {
      sandbox,
      containerName: spec.containerName,
      fresh: settled.fresh || taken,
      stale: settled.stale,
      warnings,
      privateWorkspace: spec.workspaceAccess === "rw" ? undefined : spec.privateWorkspace,
      changes,
      checkpoints,
      processes: async () => {
        const info = await this.containers.inspect(spec.containerName);
        return info?.state.running ? ((await commandsRunning(this.containers, info.id)) ?? []) : [];
      },
      freeze,
      forwardPort:
        sandbox instanceof DockerSandbox
          ? (destination) => sandbox.forwardPort(0, destination)
          : undefined,
      connectPort:
        sandbox instanceof DockerSandbox ? (port) => sandbox.connectPort(port) : undefined,
      release,
    };
  }

  /**
   * For each pair of checkpoint trees of `spec`'s copy, how many paths differ, without acquiring
   * its sandbox: an inspector reads only the baseline and the checkpoint store
   * (`WorkspaceCheckpoints.compare`), so nothing is frozen, started or mounted, and its image is
   * only looked up (`ImageResolver.lookupFor`): a missing one is an `ImageError`, never a build.
   */
  async compareCheckpoints(
    spec: SandboxSpec,
    pairs: readonly TreePair[],
    options: { signal?: AbortSignal | undefined } = {},
  ): Promise<(number | undefined)[]> {
    const image = await this.images.lookupFor(spec.docker, { signal: options.signal });
    const unfrozen = <T>(fn: () => Promise<T>): Promise<T> => fn();
    const checkpoints = this.workspaceCheckpoints(spec, image.reference, unfrozen, () =>
      Promise.resolve(undefined),
    );
    if (!checkpoints) return pairs.map(() => undefined);
    try {
      return await checkpoints.compare(pairs, options);
    } finally {
      await checkpoints.dispose();
    }
  }

  /** See `SandboxLease.changes`. */
  private workspaceChanges(
    spec: SandboxSpec,
    image: string,
    freeze: <T>(fn: () => Promise<T>) => Promise<T>,
  ): DockerWorkspaceChanges | undefined {
    const target = this.inspectedWorkspace(spec, image);
    if (!target) return undefined;
    return dockerWorkspaceChanges({ inspectors: this.inspectors, target, freeze });
  }

  /** See `SandboxLease.checkpoints`. */
  private workspaceCheckpoints(
    spec: SandboxSpec,
    image: string,
    freeze: <T>(fn: () => Promise<T>) => Promise<T>,
    quiet: () => Promise<SandboxQuiet | undefined>,
  ): DockerWorkspaceCheckpoints | undefined {
    const target = this.inspectedWorkspace(spec, image);
    if (!target) return undefined;
    return dockerWorkspaceCheckpoints({
      inspectors: this.inspectors,
      target,
      freeze,
      quiet,
      executorVolume: async () =>
        spec.docker.executor === "resident"
          ? ensureExecutorVolume(this.support, image, residentExecutorBinary())
          : undefined,
    });
  }

  /** What inspectors of this sandbox's private copy read; undefined for rw. */
  private inspectedWorkspace(spec: SandboxSpec, image: string): InspectedWorkspace | undefined {
    if (spec.workspaceAccess === "rw" || !spec.privateWorkspace) return undefined;
    return {
      sandboxName: spec.containerName,
      workspace: spec.privateWorkspace,
      baselineGitDir: baselineGitDir(spec.privateWorkspace),
      image,
      user: spec.docker.user,
      runtime: spec.docker.runtime,
      stateDirectory: this.stateDirectory,
      ...(this.usesVolumes(spec) ? { volumes: workspaceVolumeNames(spec.containerName) } : {}),
    };
  }

  /** Whether the copy of `spec` lives in volumes on the engine (workspace-volumes.ts). */
  private usesVolumes(spec: SandboxSpec): boolean {
    return usesWorkspaceVolumes(spec, this.engine.endpoint());
  }

  /**
   * See `SandboxLease.freeze`. `onWait` hears a wait behind another command's freeze (after 1 s):
   * the acquire's progress, which the CLI prints.
   */
  private async freeze<T>(
    spec: SandboxSpec,
    fn: () => Promise<T>,
    onWait: (message: string) => void,
  ): Promise<T> {
    const name = spec.containerName;
    const found = await this.containers.inspect(name);
    const info = found && (await this.identify(found, name));
    if (info) assertAdoptable(info, spec, this.stateDirectory);
    // Nothing runs in a missing or stopped container.
    return whileFrozen(this.containers, info || undefined, fn, {
      stateDirectory: this.stateDirectory,
      containerName: name,
      onWait,
    });
  }

  private hold(name: string): void {
    this.holders.set(name, this.holderCount(name) + 1);
    if (!this.heartbeat) {
      this.heartbeat = setInterval(() => {
        for (const held of this.holders.keys()) void this.touchRecord(held);
      }, this.heartbeatMs);
      // A held sandbox must not keep the process alive by itself.
      this.heartbeat.unref();
    }
  }

  private unhold(name: string): void {
    const left = this.holderCount(name) - 1;
    if (left > 0) this.holders.set(name, left);
    else this.holders.delete(name);
    if (this.holders.size === 0 && this.heartbeat) {
      clearInterval(this.heartbeat);
      this.heartbeat = undefined;
    }
  }

  /**
   * Starts a background sweep when limits are set and one is due: idle sandboxes stopped, then
   * idle or old ones pruned. What it did is a debug line (housekeeping nobody asked for: on the
   * CLI, an info line would land in the middle of a `cordon run`'s stderr; CORDON_LOG_LEVEL=debug
   * shows it, and `cordon sandbox list --json` gives a stopped sandbox's `idleStoppedAt`); failures are
   * warnings.
   */
  private maybePrune(settings: AutoPruneOptions | undefined): void {
    const stopIdleMs = settings?.stopIdleMs || undefined;
    const idleMs = settings?.idleMs || undefined;
    const maxAgeMs = settings?.maxAgeMs || undefined;
    if (stopIdleMs === undefined && idleMs === undefined && maxAgeMs === undefined) return;
    const now = Date.now();
    const everyMs = settings?.everyMs ?? this.autoPrune?.everyMs ?? 300_000;
    if (now - this.lastPruneAt < everyMs) return;
    this.lastPruneAt = now;
    this.inBackground("automatic prune", () => this.sweep({ stopIdleMs, idleMs, maxAgeMs }));
  }

  private async sweep(limits: {
    stopIdleMs: number | undefined;
    idleMs: number | undefined;
    maxAgeMs: number | undefined;
  }): Promise<void> {
    const { stopIdleMs, idleMs, maxAgeMs } = limits;
    const holders = await this.liveRunHolders?.().catch((error: unknown) => {
      this.logger.warn({ err: error }, "cannot read which sandboxes live runs hold");
      return undefined;
    });
    // Unreadable locks: a sandbox a live run may hold is never stopped or removed on a guess.
    if (this.liveRunHolders && !holders) return;
    if (stopIdleMs !== undefined) {
      await stopIdleSandboxes({
        engine: this.engine,
        stateDirectory: this.stateDirectory,
        idleMs: stopIdleMs,
        keep: new Set(this.holders.keys()),
        holders,
        logger: this.logger,
      }).then(
        (report) => {
          if (report.stopped.length > 0) {
            this.logger.debug(
              { stopped: report.stopped.map((s) => s.name) },
              "stopped idle sandboxes",
            );
          }
        },
        (error: unknown) => this.logger.warn({ err: error }, "stopping idle sandboxes failed"),
      );
    }
    if (idleMs === undefined && maxAgeMs === undefined) return;
    await this.inventory
      .prune({
        idleMs,
        maxAgeMs,
        keep: new Set(this.holders.keys()),
        holders,
        // Unasked, only what the limits say goes: a stopped sandbox or a workspace whose
        // container was removed by hand keeps its work until it is idle too.
        stopped: false,
        orphanMinAgeMs: idleMs ?? Number.POSITIVE_INFINITY,
      })
      .then(
        (report) => {
          if (report.removed.length + report.orphans.length > 0) {
            this.logger.debug(
              {
                removed: report.removed.map((r) => `${r.name} (${r.reason})`),
                orphans: report.orphans.map((o) => o.path),
              },
              "pruned sandboxes",
            );
          }
          if (report.keptForChanges.length > 0) {
            this.logger.debug(
              { kept: report.keptForChanges.map((k) => `${k.name} (${k.reason})`) },
              "kept idle sandboxes whose changes were never applied",
            );
          }
        },
        (error: unknown) => this.logger.warn({ err: error }, "automatic sandbox prune failed"),
      );
  }

  private async prepareWorkspace(
    spec: SandboxSpec,
    context: {
      signal: AbortSignal | undefined;
      progress: (phase: AcquirePhase, message: string) => void;
      warn: (message: string) => void;
      fingerprint: boolean;
      /** Set when the copy lives in volumes: the image its seeding container is created from. */
      volumesImage: string | undefined;
    },
  ): Promise<PreparedWorkspace> {
    const prepared: PreparedWorkspace = {};
    if (context.volumesImage !== undefined) {
      const warnings: string[] = [];
      const made = await ensureWorkspaceVolumes(spec, {
        containers: this.containers,
        volumes: this.engine.volumes,
        stateDirectory: this.stateDirectory,
        image: context.volumesImage,
        warnings,
        fingerprint: context.fingerprint,
        signal: context.signal,
      });
      prepared.bytesAtMost = made.bytesAtMost;
      prepared.finish = made.finish;
      prepared.madeInVolumes = made.created;
      const where = `the volume ${made.volumes.workspace}`;
      if (made.seed) {
        context.progress(
          "workspace",
          `seeded ${where} from ${made.seed.source} (${describeSeeded(made.seed)})`,
        );
        if (made.seed.carried) context.progress("workspace", describeCarry(made.seed.carried));
      } else if (made.created) {
        context.progress("workspace", `created the private workspace as ${where}`);
      }
      for (const warning of warnings) context.warn(warning);
    } else if (spec.workspaceAccess !== "rw") {
      const workspace = await ensurePrivateWorkspace(spec, {
        stateDirectory: this.stateDirectory,
        signal: context.signal,
        fingerprint: context.fingerprint,
      });
      if (workspace.seed) {
        context.progress(
          "workspace",
          workspace.seed.repository === false
            ? `seeded ${workspace.path} from ${workspace.seed.source}: not a git repository: copied ${workspace.seed.files} file${workspace.seed.files === 1 ? "" : "s"}, ${readableSize(workspace.seed.bytes)}`
            : `seeded ${workspace.path} from ${workspace.seed.source} (${describeSeeded(workspace.seed)})`,
        );
        if (workspace.seed.carried) {
          context.progress("workspace", describeCarry(workspace.seed.carried));
        }
      } else if (workspace.created) {
        context.progress("workspace", `created the private workspace ${workspace.path}`);
      }
      for (const warning of workspace.warnings) context.warn(warning);
    }
    const access = await checkAgentWorkspaceAccess(spec);
    if (access) context.warn(access);
    // Docker's own message for a missing bind source is cryptic; name the mount instead.
    for (const mount of spec.mounts) {
      // A copy in volumes has no host path to bind.
      if (context.volumesImage !== undefined && mount.role === "workspace") continue;
      const found = await stat(mount.source).catch(() => undefined);
      if (!found) {
        throw new SandboxStartError(
          `the ${mount.role} mount source ${mount.source} (for ${mount.target}) does not exist`,
          { fix: "create it, or change the mount in the sandbox config" },
        );
      }
    }
    return prepared;
  }

  /**
   * The pool shape `spec` is taken from and refilled for, when it has a pool; a spec that cannot
   * use one (docs/pool.md) says why in the log and is made as without a pool.
   */
  private poolShapeFor(
    spec: SandboxSpec,
    pool: AcquireOptions["pool"],
    log: Logger,
  ): string | undefined {
    if (!pool || pool.size <= 0) return undefined;
    const reason = unpoolableReason(spec);
    if (reason) {
      log.debug({ reason }, "sandbox.pool is set, but this sandbox is made without it");
      return undefined;
    }
    return poolShape(spec);
  }

  /**
   * Makes new pool members until `size` wait for this shape, one at a time, after the acquire
   * that used one returned. Each member is acquired like a sandbox (private workspace, hardened
   * container, record) and runs one command, so its executor is live in this process, then
   * released. Failures are only logged: a pool is an optimisation.
   */
  private refillInBackground(
    spec: SandboxSpec,
    shape: string,
    image: ResolvedImage,
    size: number,
  ): void {
    if (this.refilling.has(shape)) return;
    this.refilling.add(shape);
    this.inBackground("refilling the warm pool", async () => {
      try {
        await this.pool.removeAbandonedClaims();
        for (let waiting = await this.pool.available(spec, shape, image); waiting < size;) {
          const lease = await this.acquireAs(poolMemberSpec(spec, shape), {}, shape);
          try {
            await lease.sandbox.exec("true");
          } finally {
            await lease.release();
          }
          waiting = await this.pool.available(spec, shape, image);
        }
      } finally {
        this.refilling.delete(shape);
      }
    });
  }

  /** The container as its identity says: a taken pool member's record overrides its labels. */
  private async identify(container: ContainerDetails, name: string): Promise<ContainerDetails> {
    if (container.labels[labelKeys.pool] === undefined) return container;
    return { ...container, labels: labelsOf(container, await this.records.read(name)) };
  }

  private settleContainer(
    spec: SandboxSpec,
    image: ResolvedImage,
    context: {
      signal: AbortSignal | undefined;
      progress: (phase: AcquirePhase, message: string) => void;
      log: Logger;
      memberOf?: string | undefined;
    },
  ): Promise<Settled> {
    const name = spec.containerName;
    return settleContainer({
      containers: this.containers,
      spec,
      image,
      stateDirectory: this.stateDirectory,
      createRequest: async () => {
        // At once: each support volume is two engine round trips a new process pays in full.
        // Both are volumes on the engine, not binds of this host's files: they travel with an
        // engine elsewhere.
        const [seccompProfileJson, hostsFile, executorVolume, caCertificatesVolume] =
          await Promise.all([
            readSeccompProfile(spec),
            spec.docker.network === "none"
              ? ensureHostsFile(this.support, spec.docker.extraHosts, image.reference)
              : undefined,
            spec.docker.executor === "resident"
              ? ensureExecutorVolume(this.support, image.reference, residentExecutorBinary())
              : undefined,
            ensureCaCertificatesVolume(
              this.support,
              spec.mounts.find((mount) => mount.role === "ca-certificates"),
              image.reference,
            ),
          ]);
        return createContainerOptions({
          // The image's own environment (a devcontainer's containerEnv) under the sandbox's.
          spec: image.env
            ? { ...spec, docker: { ...spec.docker, env: { ...image.env, ...spec.docker.env } } }
            : spec,
          image: image.reference,
          createdAt: new Date().toISOString(),
          extraLabels: context.memberOf
            ? { ...this.extraLabels, [labelKeys.pool]: context.memberOf }
            : this.extraLabels,
          stateDirectory: this.stateDirectory,
          workspaceVolume: this.usesVolumes(spec) ? workspaceVolumeMount(spec) : undefined,
          seccompProfileJson,
          hostsFile,
          executorVolume,
          caCertificatesVolume,
        });
      },
      create: (request) => this.support.createContainer(request),
      identify: (container) => this.identify(container, name),
      held: () => this.holderCount(name) > 0,
      beforeReplace: () => this.touchRecord(name),
      ensureEgress: () =>
        this.egress.ensure(spec, {
          signal: context.signal,
          onProgress: (message) => context.progress("start", message),
          // The same content-addressed volume the sandbox mounts (made once, shared).
          executorVolume: () =>
            ensureExecutorVolume(this.support, image.reference, residentExecutorBinary()),
          create: (request) => this.support.createContainer(request),
        }),
      signal: context.signal,
      progress: context.progress,
      log: context.log,
    });
  }

  /**
   * Marks the record used now, before a container is replaced: a prune in another process then
   * does not take the private workspace for an orphan in the moment no container exists.
   */
  private async touchRecord(name: string): Promise<void> {
    await this.records
      .update(name, (record) => ({ ...record, lastUsedAt: new Date().toISOString() }))
      .catch(() => undefined);
  }

  private async writeRecord(
    spec: SandboxSpec,
    image: ResolvedImage,
    container: ContainerDetails,
    log: Logger,
  ): Promise<void> {
    // Labels as identified: a taken pool member's say what its record says.
    const labels = container.labels;
    const now = new Date().toISOString();
    try {
      const previous = await this.records.read(spec.containerName);
      const pooled = previous?.containerId === container.id ? previous.pooled : undefined;
      await this.records.write({
        version: 1,
        containerName: spec.containerName,
        containerId: container.id,
        scopeKey: spec.scopeKey,
        configHash: labels[labelKeys.configHash] ?? "",
        wantedConfigHash: spec.configHash,
        wantedImage: image.reference,
        ...(spec.privateWorkspace ? { privateWorkspace: spec.privateWorkspace } : {}),
        createdAt: labels[labelKeys.createdAt] ?? container.createdAt,
        lastUsedAt: now,
        ...(pooled ? { pooled } : {}),
      });
    } catch (error) {
      // Records add times to `sandbox list`; a sandbox works without one.
      log.warn({ err: error }, "cannot write the sandbox record");
    }
  }
}

/** What `prepareWorkspace` leaves to the rest of an acquire. */
interface PreparedWorkspace {
  /** A copy in volumes just seeded: bytes it takes at most (`DiskWatchdog`'s `atMost`). */
  bytesAtMost?: number | undefined;
  /** Seeding's cleanup, run once the sandbox has started (`EnsuredWorkspaceVolumes.finish`). */
  finish?: (() => Promise<Error | undefined>) | undefined;
  /** The copy's volumes were made by this acquire, their root the sandbox user's (0755). */
  madeInVolumes?: boolean | undefined;
}

/** "3.1 MB", "14 kB": a seed's size as people read it. */
function readableSize(bytes: number): string {
  if (bytes < 1_000_000) return `${Math.ceil(bytes / 1000)} kB`;
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

/** "git: 12 files and .git (48 files), 1.2 MB": the project's files apart from its repository's. */
function describeSeeded(seed: SeedInfo): string {
  const gitDirFiles = seed.gitDirFiles ?? 0;
  const files = seed.files - gitDirFiles;
  const repository = gitDirFiles > 0 ? ` and .git (${gitDirFiles} files)` : "";
  return `${seed.method}: ${files} file${files === 1 ? "" : "s"}${repository}, ${readableSize(seed.bytes)}`;
}
