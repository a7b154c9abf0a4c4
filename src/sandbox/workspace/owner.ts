import type { Stats } from "node:fs";

/** A numeric owner on the host, as the container's user maps to it. */
export interface Owner {
  uid: number;
  gid: number;
}

/**
 * The host owner of the container's `user` setting ("uid:gid" or "uid"; a bare uid means the same
 * gid). Names cannot be mapped from the host side, so they give undefined.
 */
export function parseContainerUser(user: string): Owner | undefined {
  const match = /^(\d+)(?::(\d+))?$/.exec(user.trim());
  if (!match?.[1]) return undefined;
  const uid = Number(match[1]);
  return { uid, gid: match[2] === undefined ? uid : Number(match[2]) };
}

/** What `owner` may do to a file with `stats`, by the classic permission bits (root: anything). */
export function permissionsFor(owner: Owner, stats: Stats): { read: boolean; write: boolean } {
  if (owner.uid === 0) return { read: true, write: true };
  const shift = stats.uid === owner.uid ? 6 : stats.gid === owner.gid ? 3 : 0;
  const bits = (stats.mode >> shift) & 0o7;
  // Directories also need search (x) to be usable at all.
  const search = !stats.isDirectory() || (bits & 0o1) !== 0;
  return { read: (bits & 0o4) !== 0 && search, write: (bits & 0o2) !== 0 && search };
}

/** The uid this process runs as; undefined where the platform has none. */
export function processUid(): number | undefined {
  return typeof process.getuid === "function" ? process.getuid() : undefined;
}
