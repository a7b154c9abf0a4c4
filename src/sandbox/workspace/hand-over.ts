import { lstat, rename, rmdir } from "node:fs/promises";

import { bindWorkspaceDisk, diskImagePath, releaseWorkspaceDisk } from "./disk-budget.js";
import { baselineGitDir, seedMarkerPath } from "./paths.js";
import { isErrno } from "./tree-copy.js";

/** A workspace handed over; what is left at its old path can be cleared later. */
export interface HandedOver {
  /**
   * Clears what stays at the old path (a workspace in a disk image stays mounted there until
   * then): off the critical path, since nothing needs it. Undefined when nothing is left.
   */
  clearOldPath?: (() => Promise<void>) | undefined;
}

/**
 * Moves a private workspace, with what lives beside it (its baseline git dir and seed marker),
 * from `from` to `to`: how a warm pool member's workspace becomes the workspace of the sandbox
 * that took it. A container that has `from` bind-mounted keeps it — a rename moves the directory
 * and the mount follows the directory, and a workspace in a disk image is bound at the new path
 * (see `bindWorkspaceDisk`). Undefined, with nothing moved, when `to` already exists: that scope
 * has a workspace of its own, and it is never replaced.
 *
 * Both are cordon's own paths in one parent directory no container can reach; the move renames
 * them and never looks inside.
 */
export async function handOverWorkspace(from: string, to: string): Promise<HandedOver | undefined> {
  if (await exists(to)) return undefined;
  const inImage = await exists(diskImagePath(from));
  // The baseline first, as a seed installs it: a workspace in place always has its baseline.
  await renameIfPresent(baselineGitDir(from), baselineGitDir(to));
  await renameIfPresent(seedMarkerPath(from), seedMarkerPath(to));
  if (inImage && (await bindWorkspaceDisk(from, to))) {
    return {
      clearOldPath: async () => {
        // Unmounted before anything is deleted; the image keeps its new name.
        await releaseWorkspaceDisk(from);
        await rmdir(from).catch(() => undefined);
      },
    };
  }
  if (!inImage && (await renameDirectory(from, to))) return {};
  // Lost a race for `to`: put the rest back, so the member stays whole for the pool's prune.
  await renameIfPresent(baselineGitDir(to), baselineGitDir(from));
  await renameIfPresent(seedMarkerPath(to), seedMarkerPath(from));
  return undefined;
}

async function renameDirectory(from: string, to: string): Promise<boolean> {
  try {
    await rename(from, to);
    return true;
  } catch (error) {
    // Made by another process meanwhile (a directory with something in it is never replaced).
    if (isErrno(error, "ENOTEMPTY") || isErrno(error, "EEXIST")) return false;
    throw error;
  }
}

async function renameIfPresent(from: string, to: string): Promise<void> {
  try {
    await rename(from, to);
  } catch (error) {
    if (!isErrno(error, "ENOENT")) throw error;
  }
}

function exists(file: string): Promise<boolean> {
  return lstat(file).then(
    () => true,
    () => false,
  );
}
