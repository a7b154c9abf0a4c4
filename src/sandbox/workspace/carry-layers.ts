import { randomBytes } from "node:crypto";
import {
  chmod,
  lchown,
  lstat,
  mkdir,
  readFile,
  readdir,
  realpath,
  rename,
  rm,
  writeFile,
} from "node:fs/promises";
import path from "node:path";

import { SandboxStartError, writeFileAtomically } from "../../common/index.js";
import { carryInto, type CarrySummary } from "./carry.js";
import {
  attachWorkspaceDisk,
  diskBudgetSupport,
  mountOverlay,
  releaseWorkspaceDisk,
  unmountAt,
  unmountWorkspaceDisk,
  workspaceDiskFor,
} from "./disk-budget.js";
import { mountCountAt } from "./mount-table.js";
import type { Owner } from "./owner.js";
import { processUid } from "./owner.js";
import { isAlive } from "./process-alive.js";
import { removeWrittenTree } from "./remove-written-tree.js";
import { isErrno } from "./tree-copy.js";

/**
 * Carrying once for several copies (`SandboxSpec.carryShare`): fix-tests seeds a work copy and,
 * after the agent, a verify copy, and both need the carried `node_modules`. Copied twice, a
 * 110 MiB, 20 000-file tree costs seconds per copy where the filesystem has no reflinks. So the
 * carried directories are copied once, into a snapshot beside the copies, and each copy mounts
 * them as an overlay: the snapshot the read-only lower layer, a private directory the upper one.
 *
 * Why the agent cannot change what verification sees through a carried tree: no container ever
 * has the snapshot mounted, only overlays of it, and the kernel writes an overlay's changes to its
 * upper layer alone (a write, a delete, a rename, a mode change: all copied up or whited out). The
 * work copy's upper layer is its own; the verify copy's is new and empty. The snapshot is made by
 * the same safe tree copy as any carry, from the user's workspace, before any container runs.
 *
 * Why the mounts cannot be turned against the host: every path given to mount is cordon's own (the
 * snapshot and the upper layers lie beside the copies, in the folder no container reaches), or a
 * carried directory of a copy checked to be a real directory at its own place (no link on the
 * way), mounted over (and unmounted) through a handle on the directory that was checked, never by
 * its path (anchored-directory.ts): a process that swaps a link in after the check cannot aim the
 * mount elsewhere. Overlays are mounted nosuid,nodev.
 *
 * The disk budget holds: with `sandbox.disk` the upper layers live in a filesystem image of their
 * own, of the same size, so writes into a carried tree are bounded as the copy is.
 *
 * A copy planned without a share key layers over a snapshot of its own, named after it.
 *
 * Mounting needs root (CAP_SYS_ADMIN) and the kernel's overlay filesystem: elsewhere each copy gets
 * its own carried copy.
 */

/** What a copy records beside itself about its layers (`.<name>.carry.json`). */
interface LayerRecord {
  /** The shared snapshot (absolute). */
  snapshot: string;
  /** Workspace-relative carried directories mounted as overlays, in mount order. */
  layers: string[];
}

/** The shared snapshot of one share key, beside the copies. */
export function carrySnapshotPath(workspaceParent: string, shareKey: string): string {
  return path.join(workspaceParent, `.carry-${shareKey}`);
}

function recordPath(workspace: string): string {
  return path.join(path.dirname(workspace), `.${path.basename(workspace)}.carry.json`);
}

/** Where a copy's upper layers live: `<i>/upper` and `<i>/work` per carried directory. */
function upperRoot(workspace: string): string {
  return path.join(path.dirname(workspace), `.${path.basename(workspace)}.carry`);
}

/** Overlay options are a comma-separated list with `:` between lower layers: such paths are refused. */
const unsafeInOptions = /[,:\\\s=]/;

/** Why this host cannot layer carried trees, or undefined when it can. */
export async function carryLayerRefusal(paths: readonly string[]): Promise<string | undefined> {
  if (processUid() !== 0) return "cordon is not root, so it cannot mount an overlay";
  const support = await diskBudgetSupport();
  if (!support.enforced) return support.reason;
  const filesystems = await readFile("/proc/filesystems", "utf8").catch(() => "");
  if (!/\toverlay$/m.test(filesystems)) return "the kernel has no overlay filesystem";
  const odd = paths.find((entry) => unsafeInOptions.test(entry));
  if (odd !== undefined)
    return `the carried path ${odd} has a character overlay options cannot hold`;
  return undefined;
}

export interface SnapshotOptions {
  /** The share key (`SandboxSpec.carryShare`, else the copy's own name). */
  shareKey: string;
  /** The folder the copies live in (the private workspace's parent). */
  workspaceParent: string;
  /** Real agent workspace. */
  sourceRoot: string;
  paths: readonly string[];
  owner: Owner | undefined;
  exclude: readonly string[];
  warnings: string[];
  /** `sandbox.disk`: the carried trees must fit what the budget leaves, as a copy's must. */
  byteLimit?: number | undefined;
  signal?: AbortSignal | undefined;
}

/** The snapshot and what it holds; `made` when this call copied it. */
export interface CarrySnapshot {
  path: string;
  summary: CarrySummary;
  made: boolean;
}

/**
 * The share key's snapshot, copied from the workspace the first time (in a closed temporary
 * directory renamed into place, so a half-made snapshot is never used).
 */
export async function ensureCarrySnapshot(options: SnapshotOptions): Promise<CarrySnapshot> {
  const final = carrySnapshotPath(options.workspaceParent, options.shareKey);
  if (unsafeInOptions.test(final)) {
    throw new SandboxStartError(`the carry snapshot path ${final} cannot be an overlay layer`, {
      fix: "set sandbox.workspaceRoot (or CORDON_HOME) to a path without commas, colons or spaces",
    });
  }
  const existing = await readSummary(final);
  if (existing) return { path: final, summary: existing, made: false };
  await removeAbandoned(final);
  const temporary = `${final}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  await mkdir(temporary, { mode: 0o700 });
  try {
    const summary = await carryInto({
      sourceRoot: options.sourceRoot,
      targetRoot: temporary,
      paths: options.paths,
      owner: options.owner,
      exclude: options.exclude,
      warnings: options.warnings,
      byteLimit: options.byteLimit,
      signal: options.signal,
    });
    await writeFile(path.join(temporary, summaryName), `${JSON.stringify(summary)}\n`, {
      mode: 0o600,
    });
    try {
      await rename(temporary, final);
    } catch (error) {
      // Another process made it first: use that one.
      if (!(isErrno(error, "ENOTEMPTY") || isErrno(error, "EEXIST"))) throw error;
      const theirs = await readSummary(final);
      if (theirs) return { path: final, summary: theirs, made: false };
      throw error;
    }
    return { path: final, summary, made: true };
  } finally {
    await rm(temporary, { recursive: true, force: true });
  }
}

/** Inside the snapshot, beside the carried paths (none of which is a dot-file of this name). */
const summaryName = ".cordon-carry-summary.json";

async function readSummary(snapshot: string): Promise<CarrySummary | undefined> {
  const text = await readFile(path.join(snapshot, summaryName), "utf8").catch(() => undefined);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as CarrySummary;
  } catch {
    return undefined;
  }
}

async function removeAbandoned(final: string): Promise<void> {
  const prefix = `${path.basename(final)}.tmp-`;
  for (const name of await readdir(path.dirname(final)).catch(() => [])) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length).split("-")[0]);
    if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) continue;
    await rm(path.join(path.dirname(final), name), { recursive: true, force: true });
  }
}

/**
 * The carried paths that are real directories in the snapshot: those become overlays. The rest
 * (a carried file or link) is copied as before; it is small.
 */
export async function layeredPaths(snapshot: string, paths: readonly string[]): Promise<string[]> {
  const layered: string[] = [];
  for (const entry of paths) {
    const stats = await lstat(path.join(snapshot, entry)).catch(() => undefined);
    if (stats?.isDirectory()) layered.push(entry);
  }
  return layered;
}

/**
 * Makes the mount points of `layers` in a seed being built (closed to containers), each directory
 * on the way created owned by `owner`. A path whose parent in the seed is not a plain directory (a
 * link the workspace has there) is left out of the result and gets no mount point.
 */
export async function makeMountPoints(
  seed: string,
  layers: readonly string[],
  owner: Owner | undefined,
): Promise<string[]> {
  const made: string[] = [];
  for (const entry of layers) {
    let current = seed;
    let ok = true;
    for (const part of entry.split("/")) {
      current = path.join(current, part);
      const stats = await lstat(current).catch(() => undefined);
      if (stats && !stats.isDirectory()) {
        ok = false;
        break;
      }
      if (!stats) {
        await mkdir(current, { mode: 0o755 });
        if (owner) await lchown(current, owner.uid, owner.gid);
      }
    }
    if (ok) made.push(entry);
  }
  return made;
}

export interface MountLayersOptions {
  snapshot: string;
  layers: readonly string[];
  owner: Owner | undefined;
  /** `sandbox.disk`: the upper layers get an image of this size; undefined: a plain directory. */
  diskBytes: number | undefined;
  warnings: string[];
}

/**
 * Records and mounts the overlays of a copy just installed at `workspace` (no container has seen
 * it yet). Returns how long the mounts took, in milliseconds.
 */
export async function mountCarryLayers(
  workspace: string,
  options: MountLayersOptions,
): Promise<number> {
  const started = performance.now();
  const record: LayerRecord = { snapshot: options.snapshot, layers: [...options.layers] };
  // Recorded first: whatever is mounted is found again by removal, even after a crash here.
  await writeFileAtomically(recordPath(workspace), `${JSON.stringify(record)}\n`, { mode: 0o600 });
  const uppers = upperRoot(workspace);
  const disk = await workspaceDiskFor(options.diskBytes, options.warnings);
  if (disk) await disk.install(uppers, { owner: options.owner });
  else await mkdir(uppers, { mode: 0o700 });
  for (const [index, entry] of record.layers.entries()) {
    const layer = path.join(uppers, String(index));
    const lower = await lstat(path.join(options.snapshot, entry));
    await mkdir(path.join(layer, "upper"), { recursive: true });
    await mkdir(path.join(layer, "work"), { recursive: true, mode: 0o700 });
    // The upper layer's root gives the carried directory its owner and mode in the copy.
    if (options.owner) {
      await lchown(path.join(layer, "upper"), options.owner.uid, options.owner.gid);
    }
    await chmod(path.join(layer, "upper"), lower.mode & 0o7777);
  }
  await mountRecorded(workspace, record);
  return Math.round(performance.now() - started);
}

/**
 * For an existing copy about to get a container: mounts its upper layers' image and its overlays
 * again where they are not mounted (after its container was removed with the copy kept, or a
 * reboot). A copy without layers needs nothing.
 */
export async function attachCarryLayers(workspace: string, warnings: string[]): Promise<void> {
  const record = await readRecord(workspace);
  if (!record) return;
  if (!(await readSummary(record.snapshot))) {
    throw new SandboxStartError(
      `the private workspace ${workspace} layers its carried paths over ${record.snapshot}, which is gone`,
      {
        fix: `remove the sandbox (\`cordon sandbox rm ${path.basename(workspace)}\`) and run again`,
      },
    );
  }
  await attachWorkspaceDisk(upperRoot(workspace), { diskBytes: undefined, warnings });
  await mountRecorded(workspace, record);
}

async function mountRecorded(workspace: string, record: LayerRecord): Promise<void> {
  const root = await realpath(workspace);
  for (const [index, entry] of record.layers.entries()) {
    const target = path.join(root, entry);
    if ((await mountCountAt(target)) > 0) continue;
    // No link on the way: the mount lands where the copy's own directory is, nowhere else.
    const [stats, real] = await Promise.all([
      lstat(target).catch(() => undefined),
      realpath(target).catch(() => undefined),
    ]);
    if (!stats?.isDirectory() || real !== target) {
      throw new SandboxStartError(
        `the carried directory ${entry} of ${workspace} is no longer a directory of its own`,
        {
          fix: `remove the sandbox (\`cordon sandbox rm ${path.basename(workspace)}\`) and run again`,
        },
      );
    }
    const layer = path.join(upperRoot(workspace), String(index));
    await mountOverlay(target, {
      lower: path.join(record.snapshot, entry),
      upper: path.join(layer, "upper"),
      work: path.join(layer, "work"),
    });
  }
}

/** A copy's layer record; undefined when missing or unreadable (nothing then names a snapshot). */
async function readRecord(workspace: string): Promise<LayerRecord | undefined> {
  return parseRecord(await readFile(recordPath(workspace), "utf8").catch(() => undefined));
}

function parseRecord(text: string | undefined): LayerRecord | undefined {
  let parsed: Partial<LayerRecord>;
  try {
    parsed = JSON.parse(text ?? "") as Partial<LayerRecord>;
  } catch {
    return undefined;
  }
  if (typeof parsed.snapshot !== "string" || !Array.isArray(parsed.layers)) return undefined;
  return { snapshot: parsed.snapshot, layers: parsed.layers.filter((l) => typeof l === "string") };
}

/**
 * Unmounts a copy's overlays and its upper layers' image, before the copy itself is unmounted or
 * deleted. `keep`: the upper layers stay (the copy is kept, its container gone); otherwise they
 * are deleted, and the snapshot too when no other copy's record names it.
 */
export async function releaseCarryLayers(
  workspace: string,
  options: { keep: boolean },
): Promise<void> {
  const parent = await realpath(path.dirname(workspace)).catch(() => undefined);
  if (!parent) return;
  const resolved = path.join(parent, path.basename(workspace));
  const record = await readRecord(resolved);
  if (!record) return;
  for (const entry of [...record.layers].reverse()) await unmountAt(path.join(resolved, entry));
  const uppers = upperRoot(resolved);
  if (options.keep) {
    await unmountWorkspaceDisk(uppers);
    return;
  }
  await releaseWorkspaceDisk(uppers);
  await removeWrittenTree(uppers);
  await rm(recordPath(resolved), { force: true });
  if (!(await snapshotInUse(parent, record.snapshot))) {
    await rm(record.snapshot, { recursive: true, force: true });
  }
}

async function snapshotInUse(parent: string, snapshot: string): Promise<boolean> {
  for (const name of await readdir(parent).catch(() => [])) {
    if (!name.endsWith(".carry.json")) continue;
    const text = await readFile(path.join(parent, name), "utf8").catch(() => undefined);
    if (text === undefined) continue;
    // A record that cannot be read may name it: kept, never deleted on doubt.
    const record = parseRecord(text);
    if (record === undefined || record.snapshot === snapshot) return true;
  }
  return false;
}

/** A leftover of carried layers that no copy uses, as `carryLeftovers` finds it. */
export interface CarryLeftover {
  /** Absolute path of the snapshot, half-made snapshot or copy record. */
  path: string;
  reason: string;
  /** Its last change (ms since the epoch): prune leaves a young one for its grace. */
  changedAtMs: number;
}

const snapshotPrefix = ".carry-";
const recordSuffix = ".carry.json";

/**
 * What crashes leave of carried layers in the folder of the copies, for prune to sweep: a
 * snapshot (`.carry-<key>`) no copy's record names (the process died between making it and
 * recording the copy that layers it, or while releasing the last such copy); a half-made one
 * (`.carry-<key>.tmp-<pid>-…`) of a process that is gone; a copy's record with its upper layers
 * (`.<name>.carry.json`, `.<name>.carry/`) whose copy is gone.
 *
 * While a seed is being built in the folder (a `.<name>.seeding-<pid>-…` of a live process) no
 * snapshot counts as unused: that seed may have made or found one it has not recorded yet.
 */
export async function carryLeftovers(parent: string): Promise<CarryLeftover[]> {
  const names = await readdir(parent).catch(() => [] as string[]);
  const seeding = names.some((name) => {
    const match = /^\..+\.seeding-(\d+)-/.exec(name);
    return match?.[1] !== undefined && isAlive(Number(match[1]));
  });
  const named = new Set<string>();
  const leftovers: CarryLeftover[] = [];
  for (const name of names.filter((entry) => entry.endsWith(recordSuffix))) {
    const copy = path.join(parent, name.slice(1, -recordSuffix.length));
    const record = await readRecord(copy).catch(() => undefined);
    // Compared as the kernel resolves them: a record may spell the folder another way.
    if (record) named.add(await realOrResolved(record.snapshot));
    if (
      await lstat(copy).then(
        () => false,
        () => true,
      )
    ) {
      leftovers.push({
        path: path.join(parent, name),
        reason: "carried layers of a private workspace that is gone",
        changedAtMs: await changedAt(path.join(parent, name)),
      });
    }
  }
  for (const name of names.filter((entry) => entry.startsWith(snapshotPrefix))) {
    const full = path.join(parent, name);
    const building = /\.tmp-(\d+)-[0-9a-f]+$/.exec(name);
    if (building?.[1] !== undefined) {
      if (isAlive(Number(building[1]))) continue;
      leftovers.push({
        path: full,
        reason: "carried-tree snapshot a process that is gone was making",
        changedAtMs: await changedAt(full),
      });
      continue;
    }
    if (seeding || named.has(await realOrResolved(full))) continue;
    leftovers.push({
      path: full,
      reason: "carried-tree snapshot no private workspace layers",
      changedAtMs: await changedAt(full),
    });
  }
  return leftovers.sort((a, b) => a.path.localeCompare(b.path));
}

async function realOrResolved(entry: string): Promise<string> {
  return realpath(entry).catch(() => path.resolve(entry));
}

async function changedAt(entry: string): Promise<number> {
  return (await lstat(entry).catch(() => undefined))?.mtimeMs ?? 0;
}

/**
 * Removes one leftover `carryLeftovers` found (in the same folder): a snapshot or half-made one
 * is deleted (no container ever mounts one, and no record names it); a record whose copy is gone
 * is released as its copy would be — overlays and the upper layers' image unmounted, the upper
 * layers deleted, the snapshot too once nothing names it.
 */
export async function removeCarryLeftover(leftover: CarryLeftover): Promise<void> {
  const name = path.basename(leftover.path);
  if (name.endsWith(recordSuffix)) {
    const copy = path.join(path.dirname(leftover.path), name.slice(1, -recordSuffix.length));
    await releaseCarryLayers(copy, { keep: false });
    return;
  }
  if (name.startsWith(snapshotPrefix)) await rm(leftover.path, { recursive: true, force: true });
}
