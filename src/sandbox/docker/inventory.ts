import { lstat, readdir, realpath, rm } from "node:fs/promises";
import path from "node:path";

import {
  AbortedError,
  ConfigError,
  CordonError,
  ExitCode,
  createSilentLogger,
  messageOf,
  processState,
  type Logger,
} from "../../common/index.js";
import {
  baselineGitDir,
  carryLeftovers,
  diskImagePath,
  isInside,
  mountCountAt,
  privateWorkspacePath,
  privateWorkspaceRoot,
  releaseCarryLayers,
  releaseWorkspaceDisk,
  removeCarryLeftover,
  removeWrittenTree,
  unmountWorkspaceDisk,
  seedMarkerPath,
  seedTempPrefix,
} from "../workspace/index.js";
import type { ContainerClient, ContainerSummary } from "./client/index.js";
import { isBusy } from "./container-activity.js";
import { labelKeys } from "./container-options.js";
import type { DockerEngine } from "./engine.js";
import { labelsOf } from "./container-identity.js";
import { removeWorkspaceVolumes, volumeLabels } from "./workspace-volumes.js";
import { SandboxRecords, type SandboxRecord } from "./records.js";
import {
  describeFreezeHolder,
  frozenSandboxNames,
  freezeMarkerFile,
  holdFreezeMarker,
  readFreezeMarker,
  removeStaleFreezeMarker,
} from "./freeze-marker.js";
import type { SandboxHolders } from "./idle-stop.js";
import { SandboxImage, sandboxImageRepository, type SandboxImageOptions } from "./sandbox-image.js";
import { EgressProxies } from "./egress/index.js";
import { inspectorLabels } from "./inspector/index.js";
import {
  pruneSupportVolumes,
  unusedSupportVolumes,
  type UnusedSupportVolume,
} from "./support-volume-sweep.js";
import { forgetChangesRecords } from "../changes-records/index.js";
import {
  UnappliedChangesCheck,
  describeUnapplied,
  type CheckedCopy,
  type CopyWork,
  type UnappliedChanges,
} from "./unapplied-changes.js";

export type Freshness = "current" | "stale" | "unknown";

/** One sandbox as `cordon sandbox list` shows it. */
export interface SandboxSummary {
  name: string;
  containerId: string;
  scope: string;
  scopeKey: string;
  agent: string;
  session: string;
  /** Docker's state: running, exited, created, paused, dead, removing. */
  state: string;
  image: string;
  /** The id of the image its container runs ("sha256:…"). */
  imageId: string;
  /** Whether the image is the one an acquire would use now (built-in: the current tag). */
  imageStatus: Freshness;
  configHash: string;
  /**
   * Against the expected hash when the caller supplies one; otherwise against the config the most
   * recent acquire asked for (stale = it was kept busy with a newer config waiting).
   */
  configStatus: Freshness;
  workspaceAccess: string;
  /** The project: the agent workspace's real path (empty for containers made before the label). */
  workspace: string;
  privateWorkspace?: string | undefined;
  createdAt: string;
  /** The last acquire or release, from the record; the creation time when there is none. */
  lastUsedAt: string;
  /** When cordon stopped it for being idle, while it stays stopped; the next acquire starts it. */
  idleStoppedAt?: string | undefined;
  /** Its egress proxy, when it has an allowlist (docs/network.md). */
  egress?: { proxy: string; state: string; allow: string[] } | undefined;
}

export interface SandboxInventoryOptions {
  engine: DockerEngine;
  /** The state directory (CORDON_HOME) whose sandboxes this lists. */
  stateDirectory: string;
  logger?: Logger | undefined;
  /** The current built-in image tag (default: computed from the Dockerfile and base image). */
  image?: string | undefined;
  imageOptions?: SandboxImageOptions | undefined;
}

export interface InventoryListOptions {
  /** The config hash the current config gives a sandbox, when the caller can compute it. */
  expectedConfigHash?: ((sandbox: SandboxSummary) => string | undefined) | undefined;
}

export interface RemovedSandbox {
  name: string;
  /** Why prune picked it; "requested" for `remove`. */
  reason: string;
  /** Undefined when only the record and workspace of a vanished container were left. */
  containerId?: string | undefined;
  /** The private workspace removed (or that would be, on a dry run). */
  workspace?: string | undefined;
  /**
   * A private workspace left in place: asked to keep it, or it lies outside
   * `<stateDir>/workspaces` (a configured `sandbox.workspaceRoot`), where cordon deletes nothing.
   */
  keptWorkspace?: string | undefined;
  /** Unapplied changes its copy held, deleted because the caller said to discard them. */
  discardedChanges?: UnappliedChanges | undefined;
}

export interface SandboxRemoveOptions {
  /** Keep the private workspace (the container and record go). */
  keepWorkspace?: boolean | undefined;
  /**
   * Delete a private copy even when it holds changes `cordon apply` never applied. Without it,
   * such a sandbox is refused with `UnappliedChangesError`.
   */
  discardChanges?: boolean | undefined;
  /**
   * Hears that the removal waits for a live cordon command that has the sandbox frozen (a
   * rollback, a diff), said after 1 s; the removal goes ahead once it is done.
   */
  onWait?: ((message: string) => void) | undefined;
  /**
   * Stops that wait (`AbortedError`): nothing of the sandbox is removed and the other command's
   * marker is left alone. A removal already under way is not stopped: it would leave half a sandbox.
   */
  signal?: AbortSignal | undefined;
}

/** A private workspace whose container is gone (removed by hand, by CI, by an engine reset). */
export interface OrphanWorkspace {
  /** Host path of the private workspace. */
  path: string;
  /** The sandbox it belonged to, when its record still names it. */
  sandbox?: string | undefined;
  /** It lives in a disk image (`sandbox.disk`). */
  diskImage: boolean;
  /** Still mounted, holding a loop device, though no container uses it. */
  mounted: boolean;
  /**
   * The copy is Docker volumes on the engine (workspace-volumes.ts), not on this host: `path` is
   * then its workspace volume's name.
   */
  volumes?: boolean | undefined;
}

/** A sandbox or orphaned copy prune left in place because its work was never applied. */
export interface KeptForChanges {
  /** The sandbox's name (an orphan's: the name in its record, or its directory's). */
  name: string;
  /** Host path of the private copy. */
  workspace: string;
  /** Why it was a candidate for removal, then why it was kept. */
  reason: string;
  /** Undefined when the copy could not be read (it is kept all the same). */
  changes?: UnappliedChanges | undefined;
}

/**
 * The sandbox's private copy holds changes `cordon apply` never applied (or could not be read),
 * so it was not removed.
 */
/** What prune's sweeps of orphans (records, directories, volumes) share. */
interface OrphanSweep {
  /** Names of the sandboxes that have a container. */
  live: Set<string>;
  /** Private workspaces a container or an earlier sweep accounts for (sweeps add to it). */
  referenced: Set<string>;
  grace: { now: number; minAgeMs: number };
  /** An orphan last used before this (ms) is past its grace. */
  usedBefore: number;
  report: PruneReport;
  discardChanges: boolean;
}

export class UnappliedChangesError extends CordonError {
  readonly code = "unapplied_changes";
  readonly exitCode = ExitCode.usage;

  constructor(
    readonly sandbox: string,
    readonly work: Exclude<CopyWork, { state: "none" }>,
  ) {
    super(describeWork(sandbox, work), { fix: keepOrDiscardFix(sandbox, work) });
  }
}

/** "cordon-x holds 3 changed files never applied" (see `describeUnapplied`). */
export function describeWork(name: string, work: Exclude<CopyWork, { state: "none" }>): string {
  if (work.state === "unknown") return `${name} was kept: ${work.reason}`;
  return `${name} holds ${describeUnapplied(work.changes)}`;
}

function keepOrDiscardFix(name: string, work: Exclude<CopyWork, { state: "none" }>): string {
  const discard = `\`cordon sandbox rm ${name} --discard-changes\` deletes them, \`--keep-workspace\` keeps the copy`;
  if (work.state === "unknown" || !work.changes.review) return discard;
  const where = work.changes.project ? ` in ${work.changes.project}` : "";
  const apply = work.changes.review.replace(/^cordon diff/, "cordon apply");
  return `\`${work.changes.review}\`${where} shows them and \`${apply}\` applies them; ${discard}`;
}

export interface PruneOptions {
  /** Remove sandboxes unused for longer than this (ms); ones running commands are skipped. */
  idleMs?: number | undefined;
  /** Remove sandboxes created longer ago than this (ms), busy or not. */
  maxAgeMs?: number | undefined;
  /** Report what would be removed, remove nothing. */
  dryRun?: boolean | undefined;
  /** Names never removed (the sandboxes a manager holds right now). */
  keep?: ReadonlySet<string> | undefined;
  /** What live runs of any process hold: never removed either. */
  holders?: SandboxHolders | undefined;
  /**
   * Remove stopped, dead and never-started containers whatever the limits say (default true, what
   * `cordon sandbox prune` does). False: they go only when idle or old, like running ones.
   */
  stopped?: boolean | undefined;
  /**
   * Orphaned workspaces and records go only once unused for this long (ms). Default one minute
   * (an acquire in another process may be between creating a workspace and its container).
   */
  orphanMinAgeMs?: number | undefined;
  /** As `SandboxRemoveOptions.onWait`, for each sandbox the prune removes. */
  onWait?: ((message: string) => void) | undefined;
  /**
   * Support volumes no container mounts go only once made this long ago (ms). Default ten
   * minutes, and not `orphanMinAgeMs`: they are the engine's, shared by every state directory's
   * processes, so a prune of one state directory must not sweep what another is about to mount.
   */
  supportVolumeMinAgeMs?: number | undefined;
  /**
   * Also remove sandboxes and orphaned copies holding changes `cordon apply` never applied
   * (default false: they are kept and listed in `keptForChanges`).
   */
  discardChanges?: boolean | undefined;
  /** "Now", for tests. */
  now?: Date | undefined;
}

export interface PruneReport {
  dryRun: boolean;
  /** Containers (with their private workspaces and records) removed. */
  removed: RemovedSandbox[];
  /** Private workspaces and records whose container is gone. */
  orphans: { path: string; reason: string; discardedChanges?: UnappliedChanges | undefined }[];
  /** Sandboxes that matched but were kept, with why. */
  skipped: { name: string; reason: string }[];
  /** Sandboxes and orphaned copies that matched but hold unapplied changes: kept. */
  keptForChanges: KeptForChanges[];
}

/**
 * Orphans younger than this are left alone: an acquire in another process may be between
 * creating the workspace and creating its container.
 */
export const orphanGraceMs = 60_000;

/** See `PruneOptions.supportVolumeMinAgeMs`. */
export const supportVolumeGraceMs = 10 * 60_000;

/**
 * Says why an orphan used moments ago was left: a prune that says "nothing to prune" right after
 * a `docker rm -f` would send the user to `rm -rf` a state directory that is still mounted.
 * Silent for a prune whose grace never ends (the automatic one of an acquire).
 */
function leftForGrace(
  report: PruneReport,
  name: string,
  usedAtMs: number,
  grace: { now: number; minAgeMs: number },
): void {
  if (!Number.isFinite(grace.minAgeMs)) return;
  const ago = Math.max(0, Math.round((grace.now - usedAtMs) / 1000));
  const after = new Date(usedAtMs + grace.minAgeMs + 1000).toISOString().slice(11, 19);
  report.skipped.push({
    name,
    reason: `no container uses it, but it was in use ${ago}s ago: an acquire in another process may be making its container, so \`cordon sandbox prune\` releases it only after ${after} UTC`,
  });
}

/**
 * The sandboxes of one state directory, as Docker knows them (containers labelled
 * `cordon.managed` and `cordon.home`), plus the times cordon recorded. Removes containers,
 * their private workspaces and records, in that order: a record goes only after its container.
 */
export class SandboxInventory {
  private readonly engine: DockerEngine;
  private readonly stateDirectory: string;
  private readonly records: SandboxRecords;
  private readonly containers: ContainerClient;
  private readonly logger: Logger;
  private readonly egress: EgressProxies;
  private readonly work: UnappliedChangesCheck;
  private readonly images: ImageFreshness;

  constructor(private readonly options: SandboxInventoryOptions) {
    this.engine = options.engine;
    this.stateDirectory = path.resolve(options.stateDirectory);
    this.records = new SandboxRecords(this.stateDirectory);
    this.containers = options.engine.containers;
    this.logger = options.logger ?? createSilentLogger();
    this.egress = new EgressProxies({
      engine: options.engine,
      stateDirectory: this.stateDirectory,
      logger: this.logger,
    });
    this.images = new ImageFreshness(options.engine, options);
    this.work = new UnappliedChangesCheck({
      containers: this.containers,
      volumes: options.engine.volumes,
      stateDirectory: this.stateDirectory,
      logger: this.logger,
    });
  }

  async list(options: InventoryListOptions = {}): Promise<SandboxSummary[]> {
    const containers = await this.listContainers();
    const records = new Map((await this.records.readAll()).map((r) => [r.containerName, r]));
    const images = new ImageFreshness(this.engine, this.options);
    const proxies = new Map((await this.egress.list()).map((p) => [p.sandbox, p]));
    const summaries: SandboxSummary[] = [];
    for (const container of containers) {
      const summary = summarize(container, records.get(container.name));
      const proxy = proxies.get(summary.name);
      if (proxy) summary.egress = { proxy: proxy.name, state: proxy.state, allow: proxy.allow };
      summary.imageStatus = await images.of(summary.image, container.imageId);
      const expected = options.expectedConfigHash?.(summary);
      if (expected !== undefined) {
        summary.configStatus = expected === summary.configHash ? "current" : "stale";
      }
      summaries.push(summary);
    }
    return summaries.sort((a, b) => a.name.localeCompare(b.name));
  }

  /**
   * Private workspaces of this state directory whose container is gone: `sandbox list` names
   * them (a mounted one holds a loop device), `sandbox prune` releases them. With
   * `settledBefore` (ms since the epoch), only those last used before then: a younger one may be
   * an acquire in progress, as prune's grace says.
   */
  async orphans(options: { settledBefore?: number | undefined } = {}): Promise<OrphanWorkspace[]> {
    const live = new Set((await this.listContainers()).map((c) => c.name));
    const records = await this.records.readAll();
    const owners = new Map<string, string | undefined>();
    const unsettled = new Set<string>();
    for (const record of records) {
      const workspace = this.ownedWorkspace(record.privateWorkspace);
      if (!workspace || live.has(record.containerName)) continue;
      owners.set(workspace, record.containerName);
      if (!(Date.parse(record.lastUsedAt) < (options.settledBefore ?? Infinity))) {
        unsettled.add(workspace);
      }
    }
    const claimed = new Set(
      records.flatMap((r) =>
        live.has(r.containerName) && r.privateWorkspace ? [path.resolve(r.privateWorkspace)] : [],
      ),
    );
    const root = privateWorkspaceRoot(this.stateDirectory);
    for (const name of await readdir(root).catch(() => [])) {
      const workspace = path.join(root, name);
      if (name.startsWith(".") || owners.has(workspace) || claimed.has(workspace)) continue;
      // A workspace whose container lives but whose record is gone is not an orphan.
      if (live.has(name)) continue;
      owners.set(workspace, undefined);
    }
    const orphans: OrphanWorkspace[] = [];
    for (const [workspace, sandbox] of owners) {
      const stats = await lstat(workspace).catch(() => undefined);
      if (!stats) continue;
      if (options.settledBefore !== undefined) {
        // Used moments ago: an acquire (this process's, or another's) may be making its container.
        if (unsettled.has(workspace)) continue;
        if (sandbox === undefined && !(stats.mtimeMs < options.settledBefore)) continue;
      }
      orphans.push({
        path: workspace,
        sandbox,
        diskImage: (await lstat(diskImagePath(workspace)).catch(() => undefined)) !== undefined,
        mounted: (await mountCountAt(workspace)) > 0,
      });
    }
    orphans.push(...(await this.volumeOrphans(live, options.settledBefore)));
    return orphans.sort((a, b) => a.path.localeCompare(b.path));
  }

  /**
   * Copies in Docker volumes of this state directory whose container is gone (with or without
   * its record): nothing of them is on this host for the directory scan above to find.
   */
  private async volumeOrphans(
    live: Set<string>,
    settledBefore: number | undefined,
  ): Promise<OrphanWorkspace[]> {
    const volumes = await this.engine.volumes.list([
      `${volumeLabels.role}=workspace`,
      `${volumeLabels.home}=${this.stateDirectory}`,
    ]);
    const orphans: OrphanWorkspace[] = [];
    for (const volume of volumes) {
      const sandbox = volume.labels[volumeLabels.sandbox] ?? "";
      if (!sandbox || live.has(sandbox)) continue;
      // Made moments ago: an acquire may be about to create its container.
      if (settledBefore !== undefined && !(volume.createdAtMs < settledBefore)) continue;
      orphans.push({ path: volume.name, sandbox, diskImage: false, mounted: false, volumes: true });
    }
    return orphans;
  }

  /** Whether there is anything of a sandbox by this name to remove: a container or a record. */
  async exists(name: string): Promise<boolean> {
    if (await this.containers.inspect(name)) return true;
    return (await this.records.read(name).catch(() => undefined)) !== undefined;
  }

  /**
   * Removes one sandbox by name: its container (whatever its state), its private workspace
   * (unless `keepWorkspace`), then its record. A cordon container of another state directory is
   * removed too (the name is explicit); a container cordon did not create is refused. A private
   * copy holding changes never applied is refused (`UnappliedChangesError`), nothing removed,
   * unless `discardChanges`.
   */
  async remove(name: string, options: SandboxRemoveOptions = {}): Promise<RemovedSandbox> {
    const info = await this.containers.inspect(name);
    const record = await this.records.read(name).catch(() => undefined);
    if (!info) {
      if (!record) {
        throw new ConfigError(`there is no sandbox named ${name}`, {
          fix: "`cordon sandbox list` shows the sandboxes",
        });
      }
      await this.assertNoUnappliedWork(
        { name, privateWorkspace: record.privateWorkspace, image: record.wantedImage },
        options,
      );
      return this.whileRemoving(name, options, async () => {
        const workspaces = await this.disposeWorkspace(record.privateWorkspace, options);
        await this.egress.remove(name);
        await this.forget(name);
        return { name, reason: "requested", ...workspaces };
      });
    }
    const labels = labelsOf(info, record);
    if (labels[labelKeys.managed] !== "true") {
      throw new ConfigError(`${name} is not a cordon sandbox; cordon does not remove it`, {
        fix: `remove it with \`docker rm -f ${name}\` if it is yours to remove`,
      });
    }
    const workspacePath = labels[labelKeys.privateWorkspace] ?? record?.privateWorkspace;
    await this.assertNoUnappliedWork(
      {
        name,
        privateWorkspace: workspacePath,
        image: info.imageId,
        containerId: info.id,
        project: labels[labelKeys.workspace],
        sessionKey: labels[labelKeys.session],
        agent: labels[labelKeys.agent],
      },
      options,
    );
    return this.whileRemoving(name, options, async () => {
      await this.containers.remove(info.id, name);
      await this.egress.remove(name);
      const workspaces = await this.disposeWorkspace(workspacePath, options);
      await this.forget(name);
      return { name, reason: "requested", containerId: info.id, ...workspaces };
    });
  }

  /**
   * Runs a removal holding the sandbox's freeze marker: a live cordon command that has it frozen
   * (a rollback writing the copy) is waited for rather than have its container and copy deleted
   * under it, as any freezer waits its turn (up to 10 minutes, then refused naming its pid); a
   * marker whose holder is dead is taken over. The marker goes with the sandbox, and a freezer
   * that waited meanwhile finds nothing to freeze.
   */
  private whileRemoving<T>(
    name: string,
    options: SandboxRemoveOptions,
    remove: () => Promise<T>,
  ): Promise<T> {
    return holdFreezeMarker(this.stateDirectory, name, remove, {
      onWait: options.onWait,
      signal: options.signal,
    });
  }

  /**
   * What a sandbox's private copy holds that cleanup would lose: unapplied changes, or unknown
   * when it cannot be read. "none" for a sandbox without a seeded copy of this state directory.
   */
  async workOf(name: string): Promise<CopyWork> {
    const info = await this.containers.inspect(name);
    const record = await this.records.read(name).catch(() => undefined);
    const labels = info ? labelsOf(info, record) : {};
    return this.checkWork({
      name,
      privateWorkspace: labels[labelKeys.privateWorkspace] ?? record?.privateWorkspace,
      image: info?.imageId ?? record?.wantedImage,
      containerId: info?.id,
      project: labels[labelKeys.workspace],
      sessionKey: labels[labelKeys.session],
      agent: labels[labelKeys.agent],
    });
  }

  private async assertNoUnappliedWork(
    copy: Omit<CheckedCopy, "privateWorkspace"> & { privateWorkspace: string | undefined },
    options: SandboxRemoveOptions,
  ): Promise<void> {
    if (options.keepWorkspace || options.discardChanges) return;
    const work = await this.checkWork(copy);
    if (work.state !== "none") throw new UnappliedChangesError(copy.name, work);
  }

  /** Only a copy cordon would delete (below this state directory) is worth reading. */
  private checkWork(
    copy: Omit<CheckedCopy, "privateWorkspace"> & { privateWorkspace: string | undefined },
  ): Promise<CopyWork> {
    const owned = this.ownedWorkspace(copy.privateWorkspace);
    if (!owned) return Promise.resolve({ state: "none" });
    return this.work.check({ ...copy, privateWorkspace: owned });
  }

  /** Drops a removed sandbox's record and what was recorded about its changes. */
  private async forget(name: string): Promise<void> {
    await this.records.remove(name);
    await forgetChangesRecords(this.stateDirectory, name);
  }

  private async disposeWorkspace(
    workspace: string | undefined,
    options: SandboxRemoveOptions,
  ): Promise<Pick<RemovedSandbox, "workspace" | "keptWorkspace">> {
    if (!workspace) return {};
    if (options.keepWorkspace) {
      // Kept, but not left mounted with no sandbox on it (acquire mounts it again); only a
      // workspace of this state directory, as for removal.
      const owned = this.ownedWorkspace(workspace);
      if (owned) {
        await releaseCarryLayers(owned, { keep: true });
        await unmountWorkspaceDisk(owned);
      }
      return { keptWorkspace: workspace };
    }
    const removed = await this.removeWorkspace(workspace);
    return removed ? { workspace: removed } : { keptWorkspace: workspace };
  }

  /**
   * Removes `workspace` when it is an orphan of this state directory (no container and no record
   * claim it): what an acquire stopped midway leaves behind for the run that asked to discard its
   * sandbox. That run's agent never ran, so changes found in the copy are an older run's work (a
   * copy the acquire found and reused): it is kept then, and `UnappliedChangesError` says so.
   * False when it is no orphan (nothing is removed then). `owner` names it to `cordon diff`.
   */
  async discardOrphan(
    workspace: string,
    owner: Pick<CheckedCopy, "project" | "sessionKey" | "agent"> = {},
  ): Promise<boolean> {
    const wanted = path.resolve(workspace);
    const orphan = (await this.orphans()).find((o) => path.resolve(o.path) === wanted);
    if (!orphan || orphan.sandbox !== undefined) return false;
    const name = path.basename(orphan.path);
    const work = await this.checkWork({
      ...owner,
      name,
      privateWorkspace: orphan.path,
      image: await this.images.currentBuiltinTag(),
    });
    if (work.state !== "none") {
      await this.releaseMount(orphan.path);
      throw new UnappliedChangesError(name, work);
    }
    return (await this.removeWorkspace(orphan.path)) !== undefined;
  }

  /**
   * Deletes a private workspace of this state directory with its disk image, baseline and seed
   * marker, whatever it holds: for a copy cordon made a moment ago that nothing uses yet (a fork
   * that failed before its sandbox existed). False when `workspace` is not below this state
   * directory's workspaces folder (nothing is deleted then).
   */
  async discardCopy(workspace: string): Promise<boolean> {
    return (await this.removeWorkspace(workspace)) !== undefined;
  }

  /**
   * Removes every sandbox of this state directory; one refused (unapplied changes) does not keep
   * the others, and is reported in `refused`. Once `signal` aborts it stops between sandboxes (or
   * in a wait for one: see `SandboxRemoveOptions.signal`) and returns what it removed.
   */
  async removeAll(
    options: SandboxRemoveOptions = {},
  ): Promise<{ removed: RemovedSandbox[]; refused: UnappliedChangesError[] }> {
    const removed: RemovedSandbox[] = [];
    const refused: UnappliedChangesError[] = [];
    for (const container of await this.listContainers()) {
      if (options.signal?.aborted) break;
      try {
        removed.push(await this.remove(container.name, options));
      } catch (error) {
        if (error instanceof AbortedError && options.signal?.aborted) break;
        if (!(error instanceof UnappliedChangesError)) throw error;
        refused.push(error);
      }
    }
    return { removed, refused };
  }

  /**
   * Removes sandboxes that stopped or died, ones idle longer than `idleMs` (unless commands run
   * in them), ones older than `maxAgeMs`, and orphans: private workspaces and records whose
   * container is gone.
   */
  async prune(options: PruneOptions = {}): Promise<PruneReport> {
    const now = (options.now ?? new Date()).getTime();
    const dryRun = options.dryRun ?? false;
    const report: PruneReport = {
      dryRun,
      removed: [],
      orphans: [],
      skipped: [],
      keptForChanges: [],
    };
    const summaries = await this.list();

    for (const sandbox of summaries) {
      if (options.keep?.has(sandbox.name)) continue;
      if (options.holders?.({ name: sandbox.name, session: sandbox.session })) continue;
      const reason = await this.pruneReason(sandbox, options, now, report);
      if (!reason) continue;
      const entry: RemovedSandbox = {
        name: sandbox.name,
        reason,
        containerId: sandbox.containerId,
        workspace: this.ownedWorkspace(sandbox.privateWorkspace),
      };
      const work = await this.checkWork({
        name: sandbox.name,
        privateWorkspace: sandbox.privateWorkspace,
        image: sandbox.imageId,
        containerId: sandbox.containerId,
        project: sandbox.workspace,
        sessionKey: sandbox.session,
        agent: sandbox.agent,
      });
      if (work.state !== "none" && !options.discardChanges) {
        report.keptForChanges.push(keptFor(sandbox.name, entry.workspace ?? "", reason, work));
        continue;
      }
      if (work.state === "unapplied") entry.discardedChanges = work.changes;
      if (!dryRun) {
        try {
          await this.remove(sandbox.name, { discardChanges: true, onWait: options.onWait });
        } catch (error) {
          report.skipped.push({ name: sandbox.name, reason: `cannot remove: ${messageOf(error)}` });
          continue;
        }
      }
      report.removed.push(entry);
    }

    const live = new Set(summaries.map((s) => s.name));
    const referenced = new Set(
      summaries.flatMap((s) => (s.privateWorkspace ? [path.resolve(s.privateWorkspace)] : [])),
    );
    const orphanMinAgeMs = options.orphanMinAgeMs ?? orphanGraceMs;
    await this.pruneOrphanProxies(live, now - orphanMinAgeMs, report);
    await this.pruneUnstartedInspectors(now - orphanMinAgeMs, report);
    const grace = { now, minAgeMs: orphanMinAgeMs };
    const sweep: OrphanSweep = {
      live,
      referenced,
      grace,
      usedBefore: now - orphanMinAgeMs,
      report,
      discardChanges: options.discardChanges ?? false,
    };
    await this.pruneOrphanRecords(sweep);
    await this.pruneStaleFreezeMarkers(sweep);
    await this.pruneOrphanDirectories(sweep);
    await this.pruneOrphanVolumes(sweep);
    await this.pruneCarryLeftovers(grace, report);
    await this.pruneSupportVolumes(
      now - (options.supportVolumeMinAgeMs ?? supportVolumeGraceMs),
      report,
    );
    return report;
  }

  /**
   * Support volumes (the executor binary, hosts files) no container on the engine mounts, made
   * before `madeBefore` (default: any time): `sandbox list` and `doctor` name them, prune removes
   * them. The engine's, not this state directory's: every state directory's sandboxes share them.
   */
  unusedSupportVolumes(madeBefore = Infinity): Promise<UnusedSupportVolume[]> {
    return unusedSupportVolumes({
      containers: this.containers,
      volumes: this.engine.volumes,
      madeBefore,
    });
  }

  /** Support volumes no container mounts (support-volume-sweep.ts); made again when needed. */
  private async pruneSupportVolumes(madeBefore: number, report: PruneReport): Promise<void> {
    const removed = await pruneSupportVolumes({
      containers: this.containers,
      volumes: this.engine.volumes,
      madeBefore,
      dryRun: report.dryRun,
    });
    for (const volume of removed) {
      report.orphans.push({
        path: volume.name,
        reason: `support volume holding ${volume.holds}, which no container mounts; made again when a sandbox needs it`,
      });
    }
  }

  private async pruneReason(
    sandbox: SandboxSummary,
    options: PruneOptions,
    now: number,
    report: PruneReport,
  ): Promise<string | undefined> {
    const age = now - Date.parse(sandbox.createdAt);
    const running = sandbox.state === "running" || sandbox.state === "paused";
    // A sandbox cordon stopped for being idle is resting, not broken: the limits decide for it.
    if (!running && options.stopped !== false && !sandbox.idleStoppedAt) {
      if (sandbox.state === "exited" || sandbox.state === "dead") return sandbox.state;
      // A container only just created may be about to be started by another process.
      if (sandbox.state === "created" && age > orphanGraceMs) return "never started";
    }
    if (options.maxAgeMs !== undefined && age > options.maxAgeMs) return "max-age";
    if (options.idleMs !== undefined && now - Date.parse(sandbox.lastUsedAt) > options.idleMs) {
      if (running && (await isBusy(this.containers, sandbox.containerId))) {
        report.skipped.push({
          name: sandbox.name,
          reason: "idle by its record, but commands run in it",
        });
        return undefined;
      }
      return "idle";
    }
    return undefined;
  }

  /**
   * Egress proxies (and networks earlier versions made) whose sandbox container is gone. A sandbox
   * being created makes its proxy first: young ones are left alone (like orphaned workspaces),
   * and the container is looked for again right before.
   */
  private async pruneOrphanProxies(
    live: Set<string>,
    madeBefore: number,
    report: PruneReport,
  ): Promise<void> {
    for (const { sandbox, createdAtMs } of await this.egress.owners()) {
      if (live.has(sandbox) || !(createdAtMs < madeBefore)) continue;
      if (await this.containers.inspect(sandbox)) continue;
      report.orphans.push({
        path: `${sandbox}-egress`,
        reason: `egress proxy of ${sandbox}, whose container is gone`,
      });
      if (!report.dryRun) await this.egress.remove(sandbox);
    }
  }

  /**
   * Inspector containers created but never started: their process ended between the two steps
   * (killed, or its stdout closed). A started one removes itself (AutoRemove, a `sleep` lifetime);
   * one never started would stay forever. Young ones may be about to start in another process.
   */
  private async pruneUnstartedInspectors(madeBefore: number, report: PruneReport): Promise<void> {
    const inspectors = await this.containers.list({
      labels: [inspectorLabels.sandbox, `${inspectorLabels.home}=${this.stateDirectory}`],
    });
    for (const inspector of inspectors) {
      if (inspector.status !== "created" || !(inspector.createdAtMs < madeBefore)) continue;
      report.orphans.push({
        path: inspector.name,
        reason: `inspector of ${inspector.labels[inspectorLabels.sandbox] ?? "?"}, never started`,
      });
      if (!report.dryRun) await this.containers.remove(inspector.id, inspector.name);
    }
  }

  /** `sandboxName`'s inspector and seeding containers of this state directory, never started. */
  private async removeUnstartedInspectorsOf(sandboxName: string): Promise<void> {
    const inspectors = await this.containers.list({
      labels: [
        `${inspectorLabels.sandbox}=${sandboxName}`,
        `${inspectorLabels.home}=${this.stateDirectory}`,
      ],
    });
    for (const inspector of inspectors) {
      if (inspector.status === "created")
        await this.containers.remove(inspector.id, inspector.name);
    }
  }

  private async pruneOrphanRecords(sweep: OrphanSweep): Promise<void> {
    const { live, referenced, grace, usedBefore, report, discardChanges } = sweep;
    for (const record of await this.records.readAll()) {
      if (live.has(record.containerName)) continue;
      if (!(Date.parse(record.lastUsedAt) < usedBefore)) {
        leftForGrace(report, record.containerName, Date.parse(record.lastUsedAt), grace);
        continue;
      }
      // Docker is the source of truth: look again right before deleting anything.
      if (await this.containers.inspect(record.containerName)) continue;
      const workspace = record.privateWorkspace ? path.resolve(record.privateWorkspace) : undefined;
      if (workspace && !referenced.has(workspace) && this.ownedWorkspace(workspace)) {
        referenced.add(workspace);
        const reason = `private workspace of ${record.containerName}, whose container is gone`;
        const work = await this.checkWork({
          name: record.containerName,
          privateWorkspace: workspace,
          image: record.wantedImage,
        });
        if (work.state !== "none" && !discardChanges) {
          // The record stays too: it names the image and sandbox the copy belongs to.
          report.keptForChanges.push(keptFor(record.containerName, workspace, reason, work));
          if (!report.dryRun) await this.releaseMount(workspace);
          continue;
        }
        report.orphans.push({
          path: workspace,
          reason,
          ...(work.state === "unapplied" ? { discardedChanges: work.changes } : {}),
        });
        if (!report.dryRun) await this.removeWorkspace(workspace);
      }
      report.orphans.push({
        path: this.recordPath(record),
        reason: `record of ${record.containerName}, whose container is gone`,
      });
      if (!report.dryRun) await this.records.remove(record.containerName);
    }
  }

  /**
   * Freeze markers of sandboxes with no container whose holder is dead (a command killed inside
   * its freeze, then the sandbox removed by a cordon older than `whileRemoving`, or by hand). One a
   * live process holds is its own to remove; an unreadable one is left (cordon cannot tell).
   */
  private async pruneStaleFreezeMarkers(sweep: OrphanSweep): Promise<void> {
    const { live, report } = sweep;
    for (const name of await frozenSandboxNames(this.stateDirectory)) {
      if (live.has(name)) continue;
      const holder = await readFreezeMarker(this.stateDirectory, name);
      if (!holder || processState(holder) !== "dead") continue;
      if (
        !report.dryRun &&
        (await removeStaleFreezeMarker(this.stateDirectory, name)) !== "removed"
      ) {
        continue;
      }
      report.orphans.push({
        path: freezeMarkerFile(this.stateDirectory, name),
        reason: `freeze marker of ${name}, whose container is gone, left by ${describeFreezeHolder(holder)}, which is gone too`,
      });
    }
  }

  /** Directories under `<stateDir>/workspaces` that no container and no record refers to. */
  private async pruneOrphanDirectories(sweep: OrphanSweep): Promise<void> {
    const { referenced, grace, usedBefore, report, discardChanges } = sweep;
    const root = privateWorkspaceRoot(this.stateDirectory);
    let names: string[];
    try {
      names = await readdir(root);
    } catch {
      return;
    }
    const recorded = new Set(
      (await this.records.readAll()).flatMap((r) =>
        r.privateWorkspace ? [path.resolve(r.privateWorkspace)] : [],
      ),
    );
    for (const name of names) {
      // Seed markers and in-progress seeds belong to a workspace; they go with it.
      if (name.startsWith(".")) continue;
      const workspace = path.join(root, name);
      if (referenced.has(workspace) || recorded.has(workspace)) continue;
      const stats = await lstat(workspace).catch(() => undefined);
      if (!stats) continue;
      if (!(stats.mtimeMs < usedBefore)) {
        leftForGrace(report, workspace, stats.mtimeMs, grace);
        continue;
      }
      const reason = "private workspace no sandbox refers to";
      // Nothing names its image any more: the current built-in image has git too.
      const work = await this.checkWork({
        name,
        privateWorkspace: workspace,
        image: await this.images.currentBuiltinTag(),
      });
      if (work.state !== "none" && !discardChanges) {
        report.keptForChanges.push(keptFor(name, workspace, reason, work));
        if (!report.dryRun) await this.releaseMount(workspace);
        continue;
      }
      report.orphans.push({
        path: workspace,
        reason,
        ...(work.state === "unapplied" ? { discardedChanges: work.changes } : {}),
      });
      if (!report.dryRun) await this.removeWorkspace(workspace);
    }
  }

  /**
   * Copies in Docker volumes (workspace-volumes.ts) of this state directory whose sandbox has
   * neither a container nor a record (both removed by hand, an engine reset of containers only):
   * the engine's counterpart of an orphaned directory, which `pruneOrphanDirectories` cannot see
   * (nothing of the copy is on this host). Their work is read by an inspector over the volumes as
   * for any copy, and a copy holding unapplied changes (or one that cannot be read) is kept.
   */
  private async pruneOrphanVolumes(sweep: OrphanSweep): Promise<void> {
    const { live, referenced, grace, usedBefore, report, discardChanges } = sweep;
    const volumes = await this.engine.volumes.list([
      volumeLabels.sandbox,
      `${volumeLabels.home}=${this.stateDirectory}`,
    ]);
    const newest = new Map<string, number>();
    for (const volume of volumes) {
      const name = volume.labels[volumeLabels.sandbox] ?? "";
      // A label names a sandbox, never a path: anything but a container name is left alone.
      if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(name)) continue;
      newest.set(name, Math.max(newest.get(name) ?? 0, volume.createdAtMs));
    }
    const recorded = new Set((await this.records.readAll()).map((r) => r.containerName));
    for (const [name, createdAtMs] of newest) {
      const workspace = privateWorkspacePath(this.stateDirectory, name);
      if (live.has(name) || recorded.has(name) || referenced.has(path.resolve(workspace))) continue;
      if (!(createdAtMs < usedBefore)) {
        leftForGrace(report, `${name}-workspace`, createdAtMs, grace);
        continue;
      }
      // Docker is the source of truth: look again right before deleting anything.
      if (await this.containers.inspect(name)) continue;
      const reason = `Docker volumes of ${name}'s private copy, whose sandbox is gone`;
      const work = await this.checkWork({
        name,
        privateWorkspace: workspace,
        image: await this.images.currentBuiltinTag(),
      });
      if (work.state !== "none" && !discardChanges) {
        report.keptForChanges.push(keptFor(name, `${name}-workspace`, reason, work));
        continue;
      }
      report.orphans.push({
        path: `${name}-workspace`,
        reason,
        ...(work.state === "unapplied" ? { discardedChanges: work.changes } : {}),
      });
      if (!report.dryRun) {
        // The host records beside the copy's path, then the volumes (also with no records left).
        await this.removeWorkspace(workspace);
        await removeWorkspaceVolumes(this.engine.volumes, name, this.stateDirectory);
      }
    }
  }

  /**
   * Carried-tree snapshots and layers a crash left behind (carry-layers.ts `carryLeftovers`):
   * after the orphaned copies, whose release deletes the snapshots only they named. Young ones
   * wait out the grace like orphans: a seed in another process may be about to record one.
   */
  private async pruneCarryLeftovers(
    grace: { now: number; minAgeMs: number },
    report: PruneReport,
  ): Promise<void> {
    const root = privateWorkspaceRoot(this.stateDirectory);
    for (const leftover of await carryLeftovers(root)) {
      if (!(leftover.changedAtMs < grace.now - grace.minAgeMs)) {
        leftForGrace(report, leftover.path, leftover.changedAtMs, grace);
        continue;
      }
      report.orphans.push({ path: leftover.path, reason: leftover.reason });
      if (!report.dryRun) await removeCarryLeftover(leftover);
    }
  }

  /**
   * Deletes a private workspace (unmounting its disk image), its seed marker, its baseline git
   * dir and leftover seeds; only ever below this state
   * directory's workspaces folder (a label is not trusted to name a path to delete).
   */
  private async removeWorkspace(workspace: string | undefined): Promise<string | undefined> {
    const owned = this.ownedWorkspace(workspace);
    if (!owned) {
      if (workspace) {
        this.logger.warn({ workspace }, "not removing a workspace outside the state directory");
      }
      return undefined;
    }
    const real = await realpath(path.dirname(owned)).catch(() => undefined);
    if (!real || !isInside(await realpath(this.stateDirectory), real)) return undefined;
    // A workspace with a disk budget is a mounted image: unmounted first, so rm deletes the
    // mount point and not the files through it (and the image goes too).
    // Overlays of carried trees first: they are mounted inside the copy.
    await releaseCarryLayers(owned, { keep: false });
    await releaseWorkspaceDisk(owned);
    await removeWrittenTree(owned);
    // A copy that lives with the engine: its volumes (only this state directory's), after the
    // never-started containers that mount them (a seeding container whose removal, left to run
    // after the sandbox started, has not happened yet): the engine keeps a volume one uses.
    await this.removeUnstartedInspectorsOf(path.basename(owned));
    await removeWorkspaceVolumes(this.engine.volumes, path.basename(owned), this.stateDirectory);
    await rm(seedMarkerPath(owned), { force: true });
    await rm(baselineGitDir(owned), { recursive: true, force: true });
    const prefix = path.basename(seedTempPrefix(owned));
    for (const name of await readdir(path.dirname(owned)).catch(() => [])) {
      if (name.startsWith(prefix)) {
        await rm(path.join(path.dirname(owned), name), { recursive: true, force: true });
      }
    }
    return owned;
  }

  /**
   * A kept orphan's work stays in its disk image, but nothing stays mounted with no container on
   * it: unmounted (lazily if something still holds it), its loop device released with the mount.
   */
  private async releaseMount(workspace: string): Promise<void> {
    await releaseCarryLayers(workspace, { keep: true })
      .then(() => unmountWorkspaceDisk(workspace))
      .catch((error: unknown) => {
        this.logger.warn({ err: error, workspace }, "cannot unmount an orphaned workspace");
      });
  }

  private ownedWorkspace(workspace: string | undefined): string | undefined {
    if (!workspace) return undefined;
    const resolved = path.resolve(workspace);
    const root = privateWorkspaceRoot(this.stateDirectory);
    return isInside(root, resolved) && resolved !== root ? resolved : undefined;
  }

  private recordPath(record: SandboxRecord): string {
    return path.join(this.stateDirectory, "sandboxes", `${record.containerName}.json`);
  }

  private listContainers(): Promise<ContainerSummary[]> {
    return this.containers.list({
      labels: [`${labelKeys.managed}=true`, `${labelKeys.home}=${this.stateDirectory}`],
    });
  }
}

function keptFor(
  name: string,
  workspace: string,
  candidate: string,
  work: Exclude<CopyWork, { state: "none" }>,
): KeptForChanges {
  if (work.state === "unknown") return { name, workspace, reason: `${candidate}; ${work.reason}` };
  return {
    name,
    workspace,
    reason: `${candidate}; it holds ${describeUnapplied(work.changes)}`,
    changes: work.changes,
  };
}

function summarize(container: ContainerSummary, record: SandboxRecord | undefined): SandboxSummary {
  const labels = labelsOf(container, record);
  const createdAt = labels[labelKeys.createdAt] ?? new Date(container.createdAtMs).toISOString();
  const configHash = labels[labelKeys.configHash] ?? "";
  const summary: SandboxSummary = {
    name: container.name,
    containerId: container.id,
    scope: labels[labelKeys.scope] ?? "",
    scopeKey: labels[labelKeys.scopeKey] ?? "",
    agent: labels[labelKeys.agent] ?? "",
    session: labels[labelKeys.session] ?? "",
    state: container.status,
    image: labels[labelKeys.image] ?? container.image,
    imageId: container.imageId,
    imageStatus: "unknown",
    configHash,
    configStatus: record
      ? record.wantedConfigHash === configHash
        ? "current"
        : "stale"
      : "unknown",
    workspaceAccess: labels[labelKeys.workspaceAccess] ?? "",
    workspace: labels[labelKeys.workspace] ?? "",
    createdAt,
    lastUsedAt: record?.lastUsedAt ?? createdAt,
  };
  const workspace = labels[labelKeys.privateWorkspace];
  if (workspace) summary.privateWorkspace = workspace;
  if (record?.idleStoppedAt && container.status === "exited") {
    summary.idleStoppedAt = record.idleStoppedAt;
  }
  return summary;
}

/** Whether a container's image is what an acquire would use now; answers cached per reference. */
class ImageFreshness {
  private builtinTag: Promise<string | undefined> | undefined;
  private readonly ids = new Map<string, Promise<string | undefined>>();

  constructor(
    private readonly engine: DockerEngine,
    private readonly options: SandboxInventoryOptions,
  ) {}

  async of(image: string, imageId: string): Promise<Freshness> {
    if (image.startsWith(`${sandboxImageRepository}:`)) {
      const current = await this.currentBuiltinTag();
      if (current === undefined) return "unknown";
      if (current !== image) return "stale";
      // The same tag rebuilt (`cordon image build --force`) names another image now.
    }
    // Stale when its reference now names another image (a rebuild, a newer pull) or none.
    const current = await this.idOf(image);
    if (current === undefined) return "stale";
    return current === imageId ? "current" : "stale";
  }

  private idOf(image: string): Promise<string | undefined> {
    let id = this.ids.get(image);
    if (!id) {
      id = this.engine.images.inspect(image).then(
        (info) => info?.id,
        () => undefined,
      );
      this.ids.set(image, id);
    }
    return id;
  }

  currentBuiltinTag(): Promise<string | undefined> {
    this.builtinTag ??=
      this.options.image !== undefined
        ? Promise.resolve(this.options.image)
        : new SandboxImage(this.engine, this.options.imageOptions).status().then(
            (status) => status.tag,
            () => undefined,
          );
    return this.builtinTag;
  }
}
