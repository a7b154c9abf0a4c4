import path from "node:path";

import type { PatchedFile } from "./parse-git-patch.js";
import type { PatchProblem } from "./patch-problems.js";
import {
  describeResolution,
  notUtf8,
  resolveLink,
  type LinkResolution,
  type LinkTarget,
} from "./resolve-link.js";

/** The symlinks a workspace has before the patch (repository-links.ts reads them from disk). */
export interface RepositoryLinks {
  /** The target of the link at a workspace-relative path; undefined where there is none. */
  target: LinkTarget;
  /** The paths of all its links outside `.git`, read only when a patch touches a link. */
  all(): readonly string[];
}

/** A workspace with no links: what a patch alone is judged against. */
export const noRepositoryLinks: RepositoryLinks = { target: () => undefined, all: () => [] };

/** A file's state after the patch: a link's target, or undefined for anything else. */
function targetAfter(file: PatchedFile, repository: RepositoryLinks): string | undefined {
  if (file.mode === "120000") return file.symlinkTarget;
  // A rename or copy that changes no content carries no mode: it is whatever its source is.
  if (file.mode === undefined && file.from !== undefined) return repository.target(file.from);
  return undefined;
}

/**
 * The links of the tree as it will be after the patch: what the patch writes at a path wins,
 * a path it deletes or renames away holds no link, and everything else is as on disk.
 */
export function linksAfterPatch(
  files: readonly PatchedFile[],
  repository: RepositoryLinks,
): { target: LinkTarget; touched: ReadonlySet<string> } {
  const written = new Map<string, string | undefined>();
  const removed = new Set<string>();
  for (const file of files) {
    if (file.change === "deleted") removed.add(file.path);
    else if (file.change === "renamed" && file.from !== undefined) removed.add(file.from);
  }
  // Written after the removals: git writes a type change as a deletion and an addition.
  for (const file of files) {
    if (file.change !== "deleted") written.set(file.path, targetAfter(file, repository));
  }
  const target: LinkTarget = (at) =>
    written.has(at) ? written.get(at) : removed.has(at) ? undefined : repository.target(at);
  return { target, touched: new Set([...written.keys(), ...removed]) };
}

type Refusal = LinkResolution & { ok: false };

const verdicts: Record<Refusal["why"], string> = {
  "leaves the workspace": "leads out of the workspace",
  "enters .git": "leads into .git",
  loops: "loops",
  "has an empty target": "has an empty target",
  "is not UTF-8": "cannot be judged: a target that is not UTF-8",
};

function refused(resolution: LinkResolution): Refusal | undefined {
  return resolution.ok ? undefined : resolution;
}

/** The refusal of the directory a path sits in, resolved in a tree; undefined when it passes. */
function parentRefusal(at: string, target: LinkTarget): Refusal | undefined {
  const parent = path.posix.dirname(at);
  return parent === "." ? undefined : refused(resolveLink(parent, target));
}

/**
 * Links judged as the kernel resolves them (resolve-link.ts), against the tree as it will be:
 * - every link the patch adds, re-points or moves;
 * - every path it writes, whose directory must not resolve through a link out of the workspace
 *   (git apply refuses a path beyond a symlink too; this names the chain, with cordon's exit code),
 *   and every path it deletes or renames away, in the tree as it is;
 * - when the patch touches a link at all, every link the repository has: one that stayed inside
 *   before and leads out after (its chain runs through a link the patch re-pointed) is refused.
 *   One that already led out is the repository's own, not the patch's doing.
 */
export function linkProblems(
  files: readonly PatchedFile[],
  repository: RepositoryLinks,
): PatchProblem[] {
  const after = linksAfterPatch(files, repository);
  const problems: PatchProblem[] = [];
  const refuse = (at: string, what: string, refusal: Refusal): void => {
    problems.push({
      path: at,
      problem: `${what} ${verdicts[refusal.why]}: ${describeResolution(refusal)}`,
    });
  };
  let touchesLinks = false;
  for (const file of files) {
    if (file.mode === "120000" && file.symlinkTarget === "") {
      problems.push({ path: file.path, problem: "is a symlink with an empty target" });
      continue;
    }
    const gone = file.change === "deleted" ? [file.path] : [];
    if (file.change === "renamed" && file.from !== undefined) gone.push(file.from);
    for (const at of gone) {
      if (repository.target(at) !== undefined) touchesLinks = true;
      const refusal = parentRefusal(at, repository.target);
      if (refusal) refuse(at, "is removed through a symlink that", refusal);
    }
    if (file.change === "deleted") continue;
    if (after.target(file.path) !== undefined) {
      touchesLinks = true;
      if (file.path.includes(notUtf8)) {
        // Two names with different bad bytes read alike: which one a chain meets is unknown.
        problems.push({ path: file.path, problem: "is a symlink whose name is not UTF-8" });
        continue;
      }
      const refusal = refused(resolveLink(file.path, after.target));
      if (refusal) refuse(file.path, "is a symlink that", refusal);
    } else {
      const refusal = parentRefusal(file.path, after.target);
      if (refusal) refuse(file.path, "is written through a symlink that", refusal);
    }
  }
  if (!touchesLinks) return problems;
  for (const link of repository.all()) {
    if (after.touched.has(link)) continue;
    const now = resolveLink(link, repository.target);
    const refusal = refused(resolveLink(link, after.target));
    if (now.ok && refusal) refuse(link, "is a symlink the repository has that now", refusal);
  }
  return problems;
}
