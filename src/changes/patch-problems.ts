import path from "node:path";

import type { PatchedFile } from "./parse-git-patch.js";

/** Why a patch may not be applied to a real workspace. */
export interface PatchProblem {
  path: string;
  problem: string;
}

/**
 * Characters HFS+ ignores in names (git's is_hfs_dotgit): on a Mac ".g\u200cit" is ".git".
 */
const hfsIgnored = /[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/g;

/** Whether one name component is `.git` to some filesystem: any case, HFS+ and NTFS spellings. */
function isDotGit(component: string): boolean {
  // NTFS drops trailing dots and spaces; `git~1` is the 8.3 short name of `.git`.
  const name = component
    .replace(hfsIgnored, "")
    .replace(/[. ]+$/, "")
    .toLowerCase();
  return name === ".git" || name === "git~1";
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

/** What is wrong with a symlink at `link` pointing to `target`, or undefined. */
export function symlinkProblem(link: string, target: string): string | undefined {
  if (target === "") return "is a symlink with an empty target";
  // Relative targets resolve from the link's own directory.
  const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(link), target));
  if (path.posix.isAbsolute(target) || resolved === ".." || resolved.startsWith("../")) {
    return `is a symlink to ${target}, outside the workspace`;
  }
  if (resolved.split("/").some(isDotGit)) return `is a symlink to ${target}, inside .git`;
  return undefined;
}

/**
 * What makes a parsed patch unsafe to apply to a real workspace: paths outside it or into `.git`,
 * submodules, and symlinks added or re-pointed to outside the workspace or into `.git` (a later
 * write through one would land elsewhere on the host). A rename or copy that changes no content
 * carries no mode, so whether it moves a symlink is checked on disk when applying.
 */
export function patchProblems(files: readonly PatchedFile[]): PatchProblem[] {
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
    if (file.mode === "120000" && file.symlinkTarget !== undefined) {
      const problem = symlinkProblem(file.path, file.symlinkTarget);
      if (problem) problems.push({ path: file.path, problem });
    }
  }
  return problems;
}
