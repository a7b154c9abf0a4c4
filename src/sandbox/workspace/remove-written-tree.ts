import { chmod, lstat, readdir, rm } from "node:fs/promises";
import path from "node:path";

import { processUid } from "./owner.js";

/**
 * Deletes a tree a sandbox wrote (a private copy, a carried tree's upper layer), once no process
 * of the sandbox is left to change it. Where cordon is not root, the agent (the same uid) may
 * have taken its own access away from a directory (`chmod 000 dir`): rm cannot list it, and the
 * copy would stay on disk for good, every `sandbox rm` failing on it. Then the owner's access is
 * given back to every directory that lacks it — found with `lstat`, so a link is never followed
 * and nothing outside the tree is touched — and the tree is deleted again.
 */
export async function removeWrittenTree(root: string): Promise<void> {
  try {
    await rm(root, { recursive: true, force: true });
  } catch (error) {
    if (!isAccessDenied(error)) throw error;
    await grantOwnerAccess(root);
    await rm(root, { recursive: true, force: true });
  }
}

function isAccessDenied(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return code === "EACCES" || code === "EPERM";
}

/** Gives the owner read, write and search on each directory below `directory` (itself too). */
async function grantOwnerAccess(directory: string): Promise<void> {
  const stats = await lstat(directory).catch(() => undefined);
  if (!stats?.isDirectory()) return;
  // Only the owner may chmod: a directory of another user stays as it is, and rm says so.
  if ((stats.mode & 0o700) !== 0o700 && stats.uid === processUid()) {
    await chmod(directory, (stats.mode & 0o7777) | 0o700);
  }
  const entries = await readdir(directory, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (entry.isDirectory()) await grantOwnerAccess(path.join(directory, entry.name));
  }
}
