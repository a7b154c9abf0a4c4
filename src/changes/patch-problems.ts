import path from "node:path";

import { isDotGit } from "./dot-git.js";
import { linkProblems, noRepositoryLinks, type RepositoryLinks } from "./link-problems.js";
import type { PatchedFile } from "./parse-git-patch.js";

/** Why a patch may not be applied to a real workspace. */
export interface PatchProblem {
  path: string;
  problem: string;
}

/** What is wrong with a workspace-relative name, or undefined. */
function nameProblem(name: string): string | undefined {
  const components = name.split("/");
  if (name === "" || path.posix.isAbsolute(name) || components.includes("..")) {
    return "the path leaves the workspace";
  }
  if (components.some((component) => component === "" || component === ".")) {
    return "the path is not in canonical form (empty or `.` components)";
  }
  if (components.some(isDotGit)) return "the path is inside .git";
  return undefined;
}

/**
 * What makes a parsed patch unsafe to apply to a real workspace: paths outside it or into `.git`,
 * submodules, and symlinks that, resolved as the kernel resolves them in the tree as it will be,
 * lead out of the workspace or into `.git` (a later write through one would land elsewhere on the
 * host), or paths written through such a link (link-problems.ts). `repository` holds the links
 * the workspace already has; without it only the patch's own links are known (and a rename or
 * copy that changes no content, which carries no mode, cannot be judged).
 */
export function patchProblems(
  files: readonly PatchedFile[],
  repository: RepositoryLinks = noRepositoryLinks,
): PatchProblem[] {
  const problems: PatchProblem[] = [];
  for (const file of files) {
    for (const name of [file.path, file.from].filter((n): n is string => n !== undefined)) {
      const problem = nameProblem(name);
      if (problem) problems.push({ path: name, problem });
    }
    if (file.mode === "160000") {
      // git apply cannot write a nested repository's checkout; its pointer alone would lie.
      const problem =
        file.change === "added"
          ? "adds a submodule (a nested git repository)"
          : "changes a submodule (a nested git repository): make that change in the submodule";
      problems.push({ path: file.path, problem });
    }
  }
  // Links are resolved through the names, so only a patch whose names all pass is walked.
  if (problems.length > 0) return problems;
  return linkProblems(files, repository);
}
