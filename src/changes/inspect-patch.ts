import path from "node:path";

/** One file a patch touches. */
export interface PatchedFile {
  /** Path relative to the workspace root, after the change (the old path for a deletion). */
  path: string;
  /** For a rename or copy: where it came from. */
  from?: string | undefined;
  change: "added" | "modified" | "deleted" | "renamed" | "copied" | "mode";
  binary: boolean;
  /** Git file mode after the change, e.g. "100644", "100755", "120000" (symlink). */
  mode?: string | undefined;
  /** For a symlink (mode 120000): its target. */
  symlinkTarget?: string | undefined;
}

/** Why a patch may not be applied to a real workspace. */
export interface PatchProblem {
  path: string;
  problem: string;
}

/** Undoes git's C-style quoting of unusual path names ("a/\303\244.txt"). */
function unquote(text: string): string {
  if (!text.startsWith('"')) return text;
  const bytes: number[] = [];
  const simple: Record<string, number> = {
    n: 10,
    t: 9,
    r: 13,
    '"': 34,
    "\\": 92,
    a: 7,
    b: 8,
    f: 12,
    v: 11,
  };
  for (let i = 1; i < text.length - 1; i += 1) {
    const char = text[i] ?? "";
    if (char !== "\\") {
      bytes.push(...Buffer.from(char, "utf8"));
      continue;
    }
    const next = text[i + 1] ?? "";
    if (/[0-7]/.test(next)) {
      bytes.push(parseInt(text.slice(i + 1, i + 4), 8));
      i += 3;
    } else {
      bytes.push(simple[next] ?? next.charCodeAt(0));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

function stripPrefix(name: string): string {
  const plain = unquote(name.trim());
  return plain.replace(/^[ab]\//, "");
}

/**
 * The files a git patch touches, read from its headers (`diff --git`, mode, rename and `---`/`+++`
 * lines). Header lines cannot be mistaken for content: content lines start with a space, `+`, `-`
 * or `\`, and base85 binary lines never contain a space.
 */
export function inspectPatch(patch: string): PatchedFile[] {
  const files: PatchedFile[] = [];
  let current: PatchedFile | undefined;
  let expectSymlinkTarget = false;
  for (const line of patch.split("\n")) {
    if (line.startsWith("diff --git ")) {
      current = { path: "", change: "modified", binary: false };
      files.push(current);
      expectSymlinkTarget = false;
      // Fallback for binary and mode-only changes, which have no ---/+++ lines.
      const match = /^diff --git (?:"?a\/)(.*?)"? (?:"?b\/)(.*?)"?$/.exec(line);
      if (match) current.path = stripPrefix(`b/${match[2] ?? ""}`);
      continue;
    }
    if (!current) continue;
    if (line.startsWith("new file mode ")) {
      current.change = "added";
      current.mode = line.slice("new file mode ".length).trim();
    } else if (line.startsWith("deleted file mode ")) {
      current.change = "deleted";
    } else if (line.startsWith("new mode ")) {
      current.mode = line.slice("new mode ".length).trim();
      if (current.change === "modified") current.change = "mode";
    } else if (line.startsWith("rename from ") || line.startsWith("copy from ")) {
      current.from = stripPrefix(line.slice(line.indexOf(" from ") + 6));
      current.change = line.startsWith("rename") ? "renamed" : "copied";
    } else if (line.startsWith("rename to ") || line.startsWith("copy to ")) {
      current.path = stripPrefix(line.slice(line.indexOf(" to ") + 4));
    } else if (line.startsWith("--- ") && current.change === "deleted") {
      current.path = stripPrefix(line.slice(4));
    } else if (line.startsWith("+++ ") && line !== "+++ /dev/null") {
      current.path = stripPrefix(line.slice(4));
    } else if (line.startsWith("GIT binary patch") || line.startsWith("Binary files ")) {
      current.binary = true;
    } else if (line.startsWith("@@")) {
      expectSymlinkTarget = current.mode === "120000";
    } else if (expectSymlinkTarget && line.startsWith("+")) {
      current.symlinkTarget = line.slice(1);
      expectSymlinkTarget = false;
    }
  }
  return files;
}

const protectedNames = /(^|\/)\.git(\/|$)/i;

/**
 * What makes a patch unsafe to apply to a real workspace: paths outside it or into `.git`,
 * submodules, and symlinks that point outside the workspace (a later write through one would land
 * elsewhere on the host). `git apply` refuses some of these itself; checking first gives a clear
 * message and does not depend on the git version.
 */
export function patchProblems(files: readonly PatchedFile[]): PatchProblem[] {
  const problems: PatchProblem[] = [];
  for (const file of files) {
    for (const name of [file.path, file.from].filter((n): n is string => n !== undefined)) {
      const normal = path.posix.normalize(name);
      if (
        name === "" ||
        path.posix.isAbsolute(name) ||
        normal.startsWith("../") ||
        normal === ".."
      ) {
        problems.push({ path: name, problem: "the path leaves the workspace" });
      } else if (protectedNames.test(normal)) {
        problems.push({ path: name, problem: "the path is inside .git" });
      }
    }
    if (file.mode === "160000") {
      problems.push({ path: file.path, problem: "adds a submodule" });
    }
    if (file.mode === "120000" && file.symlinkTarget !== undefined) {
      const target = file.symlinkTarget;
      const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(file.path), target));
      if (path.posix.isAbsolute(target) || resolved === ".." || resolved.startsWith("../")) {
        problems.push({
          path: file.path,
          problem: `is a symlink to ${target}, outside the workspace`,
        });
      }
    }
  }
  return problems;
}
