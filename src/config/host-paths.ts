import { realpathSync, statSync } from "node:fs";
import path from "node:path";

/**
 * `realpath` that also works for paths that do not exist yet: the deepest existing ancestor is
 * resolved and the rest appended, so a symlinked parent of a missing bind source is still seen.
 * The policy layer takes this as an injected function and stays free of I/O.
 */
export function hostRealpath(target: string): string {
  const absolute = path.resolve(target);
  const rest: string[] = [];
  let current = absolute;
  for (;;) {
    try {
      return path.join(realpathSync.native(current), ...rest.reverse());
    } catch {
      const parent = path.dirname(current);
      if (parent === current) return absolute;
      rest.push(path.basename(current));
      current = parent;
    }
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
