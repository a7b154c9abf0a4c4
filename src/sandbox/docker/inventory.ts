import { lstat, readdir, realpath, rm } from "node:fs/promises";
import path from "node:path";

import { ConfigError, createSilentLogger, messageOf, type Logger } from "../../common/index.js";
import {
  baselineGitDir,
  isInside,
  privateWorkspaceRoot,
  releaseWorkspaceDisk,
  unmountWorkspaceDisk,
  seedMarkerPath,
  seedTempPrefix,
} from "../workspace/index.js";
import type { ContainerClient, ContainerSummary } from "./client/index.js";
import { isBusy } from "./container-activity.js";
import { labelKeys } from "./container-options.js";
import type { DockerEngine } from "./engine.js";
import { labelsOf } from "./container-identity.js";
import { SandboxRecords, type SandboxRecord } from "./records.js";
import type { SandboxHolders } from "./idle-stop.js";
import { SandboxImage, sandboxImageRepository, type SandboxImageOptions } from "./sandbox-image.js";
import { EgressProxies } from "./egress/index.js";

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
  /** "Now", for tests. */
  now?: Date | undefined;
}

export interface PruneReport {
  dryRun: boolean;
  /** Containers (with their private workspaces and records) removed. */
  removed: RemovedSandbox[];
  /** Private workspaces and records whose container is gone. */
  orphans: { path: string; reason: string }[];
  /** Sandboxes that matched but were kept, with why. */
  skipped: { name: string; reason: string }[];
}

/**
 * Orphans younger than this are left alone: an acquire in another process may be between
 * creating the workspace and creating its container.
 */
const orphanGraceMs = 60_000;

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

  /** Whether there is anything of a sandbox by this name to remove: a container or a record. */
  async exists(name: string): Promise<boolean> {
    if (await this.containers.inspect(name)) return true;
    return (await this.records.read(name).catch(() => undefined)) !== undefined;
  }

  /**
   * Removes one sandbox by name: its container (whatever its state), its private workspace
   * (unless `keepWorkspace`), then its record. A cordon container of another state directory is
   * removed too (the name is explicit); a container cordon did not create is refused.
   */
  async remove(name: string, options: { keepWorkspace?: boolean } = {}): Promise<RemovedSandbox> {
    const info = await this.containers.inspect(name);
    const record = await this.records.read(name).catch(() => undefined);
    if (!info) {
      if (!record) {
        throw new ConfigError(`there is no sandbox named ${name}`, {
          fix: "`cordon sandbox list` shows the sandboxes",
        });
      }
      const workspaces = await this.disposeWorkspace(record.privateWorkspace, options);
      await this.egress.remove(name);
      await this.records.remove(name);
      return { name, reason: "requested", ...workspaces };
    }
    const labels = labelsOf(info, record);
    if (labels[labelKeys.managed] !== "true") {
      throw new ConfigError(`${name} is not a cordon sandbox; cordon does not remove it`, {
        fix: `remove it with \`docker rm -f ${name}\` if it is yours to remove`,
      });
    }
    await this.containers.remove(info.id, name);
    await this.egress.remove(name);
    const workspacePath = labels[labelKeys.privateWorkspace] ?? record?.privateWorkspace;
    const workspaces = await this.disposeWorkspace(workspacePath, options);
    await this.records.remove(name);
    return { name, reason: "requested", containerId: info.id, ...workspaces };
  }

  private async disposeWorkspace(
    workspace: string | undefined,
    options: { keepWorkspace?: boolean },
  ): Promise<Pick<RemovedSandbox, "workspace" | "keptWorkspace">> {
    if (!workspace) return {};
    if (options.keepWorkspace) {
      // Kept, but not left mounted with no sandbox on it (acquire mounts it again); only a
      // workspace of this state directory, as for removal.
      const owned = this.ownedWorkspace(workspace);
      if (owned) await unmountWorkspaceDisk(owned);
      return { keptWorkspace: workspace };
    }
    const removed = await this.removeWorkspace(workspace);
    return removed ? { workspace: removed } : { keptWorkspace: workspace };
  }

  /** Removes every sandbox of this state directory. */
  async removeAll(options: { keepWorkspace?: boolean } = {}): Promise<RemovedSandbox[]> {
    const removed: RemovedSandbox[] = [];
    for (const container of await this.listContainers()) {
      removed.push(await this.remove(container.name, options));
    }
    return removed;
  }

  /**
   * Removes sandboxes that stopped or died, ones idle longer than `idleMs` (unless commands run
   * in them), ones older than `maxAgeMs`, and orphans: private workspaces and records whose
   * container is gone.
   */
  async prune(options: PruneOptions = {}): Promise<PruneReport> {
    const now = (options.now ?? new Date()).getTime();
    const dryRun = options.dryRun ?? false;
    const report: PruneReport = { dryRun, removed: [], orphans: [], skipped: [] };
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
      if (!dryRun) {
        try {
          await this.remove(sandbox.name);
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
    await this.pruneOrphanRecords(live, referenced, now - orphanMinAgeMs, report);
    await this.pruneOrphanDirectories(referenced, now - orphanMinAgeMs, report);
    return report;
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

  private async pruneOrphanRecords(
    live: Set<string>,
    referenced: Set<string>,
    usedBefore: number,
    report: PruneReport,
  ): Promise<void> {
    for (const record of await this.records.readAll()) {
      if (live.has(record.containerName)) continue;
      if (!(Date.parse(record.lastUsedAt) < usedBefore)) continue;
      // Docker is the source of truth: look again right before deleting anything.
      if (await this.containers.inspect(record.containerName)) continue;
      const workspace = record.privateWorkspace ? path.resolve(record.privateWorkspace) : undefined;
      if (workspace && !referenced.has(workspace) && this.ownedWorkspace(workspace)) {
        report.orphans.push({
          path: workspace,
          reason: `private workspace of ${record.containerName}, whose container is gone`,
        });
        if (!report.dryRun) await this.removeWorkspace(workspace);
        referenced.add(workspace);
      }
      report.orphans.push({
        path: this.recordPath(record),
        reason: `record of ${record.containerName}, whose container is gone`,
      });
      if (!report.dryRun) await this.records.remove(record.containerName);
    }
  }

  /** Directories under `<stateDir>/workspaces` that no container and no record refers to. */
  private async pruneOrphanDirectories(
    referenced: Set<string>,
    usedBefore: number,
    report: PruneReport,
  ): Promise<void> {
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
      if (!stats || !(stats.mtimeMs < usedBefore)) continue;
      report.orphans.push({ path: workspace, reason: "private workspace no sandbox refers to" });
      if (!report.dryRun) await this.removeWorkspace(workspace);
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
    await releaseWorkspaceDisk(owned);
    await rm(owned, { recursive: true, force: true });
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

  private currentBuiltinTag(): Promise<string | undefined> {
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
