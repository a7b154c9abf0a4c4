import { lstatSync, readdirSync, readlinkSync, type Stats } from "node:fs";
import path from "node:path";

import { isDotGit } from "./dot-git.js";
import type { RepositoryLinks } from "./link-problems.js";

/**
 * The links the user's real workspace has, read with lstat and readlink and never followed: a path
 * is looked at only after each directory above it was seen to be a real directory, so a link met on
 * the way ends the lookup instead of leading the read elsewhere on the host. Synchronous, so the
 * pure resolver can ask as it walks; memoized, since a chain asks about the same prefixes again.
 */
export function readRepositoryLinks(workspace: string): RepositoryLinks {
  const stats = new Map<string, Stats | undefined>();
  const statOf = (at: string): Stats | undefined => {
    if (!stats.has(at)) {
      const parent = path.posix.dirname(at);
      const parentIsDirectory = parent === "." || statOf(parent)?.isDirectory() === true;
      stats.set(at, parentIsDirectory ? lstatOrNothing(path.join(workspace, at)) : undefined);
    }
    return stats.get(at);
  };
  let all: string[] | undefined;
  return {
    target: (at) =>
      statOf(at)?.isSymbolicLink() ? readlinkSync(path.join(workspace, at), "utf8") : undefined,
    all: () => (all ??= linksUnder(workspace)),
  };
}

function lstatOrNothing(file: string): Stats | undefined {
  try {
    return lstatSync(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw error;
  }
}

/** Every link under the workspace, `.git` directories left out (the patch cannot touch them). */
function linksUnder(workspace: string): string[] {
  const links: string[] = [];
  const pending = [""];
  for (let directory = pending.pop(); directory !== undefined; directory = pending.pop()) {
    for (const entry of readdirSync(path.join(workspace, directory), { withFileTypes: true })) {
      if (isDotGit(entry.name)) continue;
      const at = directory === "" ? entry.name : `${directory}/${entry.name}`;
      // Dirent types are lstat's: a link to a directory is a link, never walked into.
      if (entry.isSymbolicLink()) links.push(at);
      else if (entry.isDirectory()) pending.push(at);
    }
  }
  return links.sort();
}
