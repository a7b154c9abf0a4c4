import { lstat, rename } from "node:fs/promises";

import { diskImagePath, moveWorkspaceDisk } from "./disk-budget.js";
import { baselineGitDir, seedMarkerPath } from "./paths.js";
import { isErrno } from "./tree-copy.js";

/**
 * Moves a private workspace, with what lives beside it (its baseline git dir and seed marker),
 * from `from` to `to`: how a warm pool member's workspace becomes the workspace of the sandbox
 * that took it. A container that has `from` bind-mounted keeps it — a rename moves the directory
 * and the mount follows the directory, and a workspace in a disk image is re-bound (see
 * `moveWorkspaceDisk`). False, with nothing moved, when `to` already exists: that scope has a
 * workspace of its own, and it is never replaced.
 *
 * Both are cordon's own paths in one parent directory no container can reach; the move renames
 * them and never looks inside.
 */
export async function handOverWorkspace(from: string, to: string): Promise<boolean> {
  if (await exists(to)) return false;
  const inImage = await exists(diskImagePath(from));
  // The baseline first, as a seed installs it: a workspace in place always has its baseline.
  await renameIfPresent(baselineGitDir(from), baselineGitDir(to));
  await renameIfPresent(seedMarkerPath(from), seedMarkerPath(to));
  if (inImage ? await moveWorkspaceDisk(from, to) : await renameDirectory(from, to)) return true;
  // Lost a race for `to`: put the rest back, so the member stays whole for the pool's prune.
  await renameIfPresent(baselineGitDir(to), baselineGitDir(from));
  await renameIfPresent(seedMarkerPath(to), seedMarkerPath(from));
  return false;
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
