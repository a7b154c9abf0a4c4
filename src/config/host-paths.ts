import { lstatSync, readlinkSync, realpathSync, statSync } from "node:fs";
import path from "node:path";

/** Symlink hops followed by hand before giving up (the kernel's own limit is 40). */
const maxLinkHops = 40;

/**
 * `realpath` that also works for paths that do not exist yet: the deepest existing ancestor is
 * resolved and the rest appended, so a symlinked parent of a missing bind source is still seen.
 * A dangling symlink is followed to where it points, since that is what a later mount would
 * reach once the target exists. The policy layer takes this as an injected function and stays
 * free of I/O.
 */
export function hostRealpath(target: string): string {
  return resolveFollowingLinks(target, 0);
}

function resolveFollowingLinks(target: string, hops: number): string {
  const absolute = path.resolve(target);
  const rest: string[] = [];
  let current = absolute;
  for (;;) {
    try {
      return path.join(realpathSync.native(current), ...rest.reverse());
    } catch {
      const link = readLinkOrUndefined(current);
      if (link !== undefined && hops < maxLinkHops) {
        const pointed = path.resolve(path.dirname(current), link);
        return resolveFollowingLinks(path.join(pointed, ...rest.reverse()), hops + 1);
      }
      const parent = path.dirname(current);
      if (parent === current) return absolute;
      rest.push(path.basename(current));
      current = parent;
    }
  }
}

function readLinkOrUndefined(p: string): string | undefined {
  try {
    return readlinkSync(p);
  } catch {
    return undefined;
  }
}

/** uid and gid of a host path's owner, or undefined when it cannot be read. */
export function hostPathOwner(target: string): { uid: number; gid: number } | undefined {
  try {
    const stats = statSync(target);
    return { uid: stats.uid, gid: stats.gid };
  } catch {
    return undefined;
  }
}

/** The uid and gid this process runs as; undefined where the platform has none. */
export function hostProcessOwner(): { uid: number; gid: number } | undefined {
  if (typeof process.getuid !== "function" || typeof process.getgid !== "function")
    return undefined;
  return { uid: process.getuid(), gid: process.getgid() };
}

/**
 * What lstat finds at a host path — a symlink is reported as one, never followed — or undefined
 * when nothing is there (or it cannot be read).
 */
export function hostEntryKind(
  target: string,
): "directory" | "file" | "symlink" | "other" | undefined {
  try {
    const stats = lstatSync(target);
    if (stats.isSymbolicLink()) return "symlink";
    if (stats.isDirectory()) return "directory";
    return stats.isFile() ? "file" : "other";
  } catch {
    return undefined;
  }
}
