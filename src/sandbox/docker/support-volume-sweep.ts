import path from "node:path";

import type {
  ContainerClient,
  ContainerSummary,
  VolumeClient,
  VolumeDetails,
} from "./client/index.js";
import { engineStatusOf } from "./docker-errors.js";
import { dataLabel, fillLabel, supportLabels } from "./support-volumes.js";

/** A support volume (support-volumes.ts) no container on the engine mounts. */
export interface UnusedSupportVolume {
  /** The data volume's name. */
  name: string;
  /** "executor", "hosts", … */
  kind: string;
  /** What it holds, as people read it. */
  holds: string;
  /** When the engine made it (ms since the epoch). */
  createdAtMs: number;
}

export interface SupportSweepOptions {
  containers: ContainerClient;
  volumes: VolumeClient;
  /** Only volumes (and stale filling containers) made before this (ms since the epoch). */
  madeBefore: number;
  /** Report, remove nothing. */
  dryRun: boolean;
  /** Which data volumes to consider (default: all): a test keeps to its own. */
  select?: ((name: string) => boolean) | undefined;
}

const holds: Record<string, string> = {
  executor: "cordon's resident executor binary",
  hosts: "a hosts file of sandboxes with no network",
  "ca-certificates": "the host's CA certificates",
};

/** "cordon's resident executor binary": what a support volume of `kind` holds. */
export function describeSupportKind(kind: string): string {
  return holds[kind] ?? `cordon's ${kind} files`;
}

/**
 * The support volumes no container on the engine mounts, made before `madeBefore`. In use is
 * decided from the containers themselves, of every state and every state directory (support
 * volumes are the engine's, shared by all): a volume mount of it, or a bind of a file in it — the
 * hosts file of a sandbox made before it also mounted its volume, which Docker does not count. A
 * stopped sandbox keeps its volumes, so it starts again as it was.
 */
export async function unusedSupportVolumes(
  options: Pick<SupportSweepOptions, "containers" | "volumes" | "madeBefore" | "select">,
): Promise<UnusedSupportVolume[]> {
  const volumes = await options.volumes.list([supportLabels.kind]);
  const containers = await options.containers.list({ labels: [] });
  const unused: UnusedSupportVolume[] = [];
  for (const volume of volumes) {
    const kind = kindOfData(volume);
    if (kind === undefined || !(volume.createdAtMs < options.madeBefore)) continue;
    if (options.select && !options.select(volume.name)) continue;
    if (containers.some((container) => mounts(container, volume))) continue;
    unused.push({
      name: volume.name,
      kind,
      holds: describeSupportKind(kind),
      createdAtMs: volume.createdAtMs,
    });
  }
  return unused.sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * Removes the support volumes no container mounts (`unusedSupportVolumes`): each is made again on
 * the engine when a sandbox next needs it. Filling containers left by a process that died
 * mid-fill go first (they would keep their volume forever). A volume a container started to mount
 * since it was listed is refused by the engine (409) and kept; one removed just before a container
 * is made from it is made again by `SupportVolumes.createContainer`. Then markers naming no volume.
 */
export async function pruneSupportVolumes(
  options: SupportSweepOptions,
): Promise<UnusedSupportVolume[]> {
  await removeStaleFillers(options);
  const unused = await unusedSupportVolumes(options);
  if (options.dryRun) return unused;
  const removed: UnusedSupportVolume[] = [];
  for (const volume of unused) {
    try {
      await options.volumes.remove(volume.name);
      removed.push(volume);
    } catch (error) {
      // Mounted since it was listed: in use after all.
      if (engineStatusOf(error) !== 409) throw error;
    }
  }
  for (const marker of await options.volumes.list([supportLabels.data])) {
    const data = marker.labels[supportLabels.data] ?? "";
    if (options.select && !options.select(data)) continue;
    if (!(await options.volumes.inspect(data))) {
      await options.volumes.remove(marker.name).catch(() => undefined);
    }
  }
  return removed;
}

/** Filling containers are never started and removed at once; an old one's process died. */
async function removeStaleFillers(options: SupportSweepOptions): Promise<void> {
  if (options.dryRun) return;
  for (const filler of await options.containers.list({ labels: [supportLabels.kind] })) {
    if (!(filler.labels[supportLabels.kind] ?? "").endsWith(fillLabel(""))) continue;
    if (filler.status !== "created" || !(filler.createdAtMs < options.madeBefore)) continue;
    if (options.select && !filler.mounts.some((m) => m.name && options.select?.(m.name))) continue;
    await options.containers.remove(filler.id, filler.name);
  }
}

/** The kind of a data volume; undefined for a marker (or anything else). */
function kindOfData(volume: VolumeDetails): string | undefined {
  const label = volume.labels[supportLabels.kind] ?? "";
  if (!label.endsWith("-data")) return undefined;
  const kind = label.slice(0, -"-data".length);
  return label === dataLabel(kind) ? kind : undefined;
}

function mounts(container: ContainerSummary, volume: VolumeDetails): boolean {
  return container.mounts.some(
    (mount) =>
      mount.name === volume.name ||
      (mount.type === "bind" && isWithin(volume.mountpoint, mount.source)),
  );
}

function isWithin(directory: string, file: string): boolean {
  const relative = path.posix.relative(directory, file);
  return relative === "" || (!relative.startsWith("..") && !path.posix.isAbsolute(relative));
}
