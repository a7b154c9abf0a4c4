import { PatchParseError, type FilePatch, type Hunk, type HunkLine } from "./types.js";

/**
 * Parses a multi-file unified diff: plain (`--- x` / `+++ y`) or git-style (`diff --git`, new /
 * deleted file modes, renames, quoted paths). Text around the diffs (a commit message, `Index:`
 * lines) is ignored. Lenient where models often slip: wrong hunk line counts are recomputed from
 * the lines, a blank line inside a hunk counts as an empty context line, CRLF patches work.
 */
export function parsePatch(text: string): FilePatch[] {
  const lines = text.split("\n").map((line) => line.replace(/\r$/, ""));
  if (lines.at(-1) === "") lines.pop();
  if (lines.some((line) => line.startsWith("*** Begin Patch"))) {
    throw new PatchParseError(
      'this is the "*** Begin Patch" format; send a unified diff (--- a/file, +++ b/file, @@ hunks) instead',
      lines.findIndex((line) => line.startsWith("*** Begin Patch")) + 1,
    );
  }
  const files: FilePatch[] = [];
  let current: MutableFilePatch | undefined;
  let i = 0;

  const finish = (): void => {
    if (current) files.push(finishFile(current));
    current = undefined;
  };

  while (i < lines.length) {
    const line = lines[i] ?? "";
    if (line.startsWith("diff --git ")) {
      finish();
      current = newFile(i + 1);
      current.git = true;
      const paths = parseGitHeaderPaths(line.slice("diff --git ".length));
      if (paths) {
        current.oldPath = paths.oldPath;
        current.newPath = paths.newPath;
      }
      i++;
      continue;
    }
    if (line.startsWith("--- ") && (lines[i + 1] ?? "").startsWith("+++ ")) {
      if (!current || current.hunks.length > 0 || current.sawFileLines) {
        finish();
        current = newFile(i + 1);
      }
      current.sawFileLines = true;
      current.minusPath = parseFileLinePath(line.slice(4), i + 1);
      current.plusPath = parseFileLinePath((lines[i + 1] ?? "").slice(4), i + 2);
      i += 2;
      continue;
    }
    if (line.startsWith("@@")) {
      if (!current || (!current.sawFileLines && !current.git)) {
        throw new PatchParseError(
          "a hunk (@@) comes before any file header; start each file with --- a/path and +++ b/path lines",
          i + 1,
        );
      }
      const { hunk, next } = parseHunk(lines, i);
      current.hunks.push(hunk);
      i = next;
      continue;
    }
    if (current?.git && current.hunks.length === 0 && !current.sawFileLines) {
      applyGitExtendedHeader(current, line, i + 1);
    }
    i++;
  }
  finish();
  if (files.length === 0) {
    throw new PatchParseError(
      "no file changes found; a unified diff needs --- a/path and +++ b/path lines followed by @@ hunks",
      1,
    );
  }
  return files;
}

interface MutableFilePatch {
  patchLine: number;
  git: boolean;
  sawFileLines: boolean;
  oldPath: string | undefined;
  newPath: string | undefined;
  /** From ---/+++ lines: null means /dev/null; undefined means not given. */
  minusPath: string | null | undefined;
  plusPath: string | null | undefined;
  renameFrom: string | undefined;
  renameTo: string | undefined;
  newFile: boolean;
  deletedFile: boolean;
  modeChange: boolean;
  hunks: Hunk[];
}

function newFile(patchLine: number): MutableFilePatch {
  return {
    patchLine,
    git: false,
    sawFileLines: false,
    oldPath: undefined,
    newPath: undefined,
    minusPath: undefined,
    plusPath: undefined,
    renameFrom: undefined,
    renameTo: undefined,
    newFile: false,
    deletedFile: false,
    modeChange: false,
    hunks: [],
  };
}

function applyGitExtendedHeader(file: MutableFilePatch, line: string, lineNumber: number): void {
  if (line.startsWith("new file mode")) file.newFile = true;
  else if (line.startsWith("deleted file mode")) file.deletedFile = true;
  else if (line.startsWith("old mode") || line.startsWith("new mode")) file.modeChange = true;
  else if (line.startsWith("rename from "))
    file.renameFrom = unquotePath(line.slice(12), lineNumber);
  else if (line.startsWith("rename to ")) file.renameTo = unquotePath(line.slice(10), lineNumber);
  else if (line.startsWith("copy from ") || line.startsWith("copy to ")) {
    throw new PatchParseError(
      "copies (copy from/to) are not supported; add the file instead",
      lineNumber,
    );
  } else if (line.startsWith("GIT binary patch") || /^Binary files .* differ$/.test(line)) {
    throw new PatchParseError(
      "binary patches are not supported; write binary files with exec instead",
      lineNumber,
    );
  }
}

function finishFile(file: MutableFilePatch): FilePatch {
  const strip = shouldStripPrefixes(file);
  const fromLines = (path: string | null | undefined, prefix: string): string | null | undefined =>
    typeof path === "string" && strip && path.startsWith(prefix) ? path.slice(2) : path;
  const minus = fromLines(file.minusPath, "a/");
  const plus = fromLines(file.plusPath, "b/");

  let oldPath: string | undefined;
  let newPath: string | undefined;
  if (file.renameFrom !== undefined || file.renameTo !== undefined) {
    oldPath = file.renameFrom ?? (typeof minus === "string" ? minus : file.oldPath);
    newPath = file.renameTo ?? (typeof plus === "string" ? plus : file.newPath);
  } else {
    oldPath = minus === null ? undefined : (minus ?? file.oldPath);
    newPath = plus === null ? undefined : (plus ?? file.newPath);
  }
  const isAdd = file.newFile || file.minusPath === null;
  const isDelete = file.deletedFile || file.plusPath === null;
  if (isAdd && isDelete) {
    throw new PatchParseError("a file cannot be both added and deleted", file.patchLine);
  }
  const where = file.patchLine;
  if (isAdd) {
    if (!newPath) throw new PatchParseError("an added file needs a path on its +++ line", where);
    return { kind: "add", oldPath: undefined, newPath, hunks: file.hunks, patchLine: where };
  }
  if (isDelete) {
    if (!oldPath) throw new PatchParseError("a deleted file needs a path on its --- line", where);
    return { kind: "delete", oldPath, newPath: undefined, hunks: file.hunks, patchLine: where };
  }
  if (!oldPath || !newPath) {
    throw new PatchParseError("a file change needs --- and +++ lines naming the file", where);
  }
  if (oldPath !== newPath) {
    return { kind: "rename", oldPath, newPath, hunks: file.hunks, patchLine: where };
  }
  if (file.hunks.length === 0) {
    if (file.modeChange) {
      throw new PatchParseError(
        `mode changes (${oldPath}) are not supported; use exec with chmod instead`,
        where,
      );
    }
    throw new PatchParseError(`the change to ${oldPath} has no hunks (@@ lines)`, where);
  }
  return { kind: "modify", oldPath, newPath, hunks: file.hunks, patchLine: where };
}

/**
 * Git always writes a/ and b/; hand-written diffs often do too. Strip them when both sides carry
 * their prefix (or are /dev/null), never a lone a/ that may be a real directory.
 */
function shouldStripPrefixes(file: MutableFilePatch): boolean {
  const { minusPath: minus, plusPath: plus } = file;
  if (minus === undefined && plus === undefined) return false;
  const minusOk = minus === null || (minus?.startsWith("a/") ?? false);
  const plusOk = plus === null || (plus?.startsWith("b/") ?? false);
  return minusOk && plusOk && !(minus === null && plus === null);
}

/** The path of a --- / +++ line: null for /dev/null; a trailing tab + timestamp is dropped. */
function parseFileLinePath(raw: string, lineNumber: number): string | null {
  let value = raw;
  if (!value.startsWith('"')) {
    const tab = value.indexOf("\t");
    if (tab !== -1) value = value.slice(0, tab);
    value = value.replace(/\s+$/, "");
  }
  const path = unquotePath(value, lineNumber);
  if (path === "/dev/null") return null;
  if (path === "") throw new PatchParseError("empty path on a --- / +++ line", lineNumber);
  return path;
}

/** `a/x b/x` of a `diff --git` line; used when no ---/+++ lines follow (pure renames). */
function parseGitHeaderPaths(rest: string): { oldPath: string; newPath: string } | undefined {
  if (rest.startsWith('"')) {
    const first = readQuoted(rest, 0);
    if (!first) return undefined;
    const second = rest.slice(first.end).trimStart();
    const newRaw = second.startsWith('"') ? readQuoted(second, 0)?.value : second;
    if (newRaw === undefined) return undefined;
    return { oldPath: stripOne(first.value, "a/"), newPath: stripOne(newRaw, "b/") };
  }
  // Unquoted names may contain " b/"; the split where both halves name the same file wins.
  const candidates: number[] = [];
  for (let at = rest.indexOf(" b/"); at !== -1; at = rest.indexOf(" b/", at + 1)) {
    candidates.push(at);
  }
  const same = candidates.find((at) => rest.slice(2, at) === rest.slice(at + 3));
  const at = same ?? candidates[0];
  if (at === undefined) return undefined;
  return { oldPath: stripOne(rest.slice(0, at), "a/"), newPath: rest.slice(at + 3) };
}

function stripOne(path: string, prefix: string): string {
  return path.startsWith(prefix) ? path.slice(prefix.length) : path;
}

function unquotePath(raw: string, lineNumber: number): string {
  if (!raw.startsWith('"')) return raw;
  const quoted = readQuoted(raw, 0);
  if (!quoted) throw new PatchParseError(`unterminated quoted path: ${raw}`, lineNumber);
  return quoted.value;
}

/** Git's C-style quoted path: \t \n \" \\ and octal byte escapes (UTF-8). */
function readQuoted(text: string, start: number): { value: string; end: number } | undefined {
  const bytes: number[] = [];
  const encoder = new TextEncoder();
  let i = start + 1;
  while (i < text.length) {
    const ch = text[i] ?? "";
    if (ch === '"') {
      return { value: new TextDecoder().decode(new Uint8Array(bytes)), end: i + 1 };
    }
    if (ch === "\\") {
      const next = text[i + 1] ?? "";
      const simple: Record<string, number> = {
        n: 10,
        t: 9,
        r: 13,
        a: 7,
        b: 8,
        f: 12,
        v: 11,
        '"': 34,
        "\\": 92,
      };
      if (/[0-7]/.test(next)) {
        const octal = /^[0-7]{1,3}/.exec(text.slice(i + 1))?.[0] ?? "0";
        bytes.push(parseInt(octal, 8));
        i += 1 + octal.length;
        continue;
      }
      const code = simple[next];
      if (code === undefined) return undefined;
      bytes.push(code);
      i += 2;
      continue;
    }
    const codePoint = text.codePointAt(i) ?? 0;
    const char = String.fromCodePoint(codePoint);
    bytes.push(...encoder.encode(char));
    i += char.length;
  }
  return undefined;
}

const HUNK_HEADER = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

function parseHunk(lines: string[], start: number): { hunk: Hunk; next: number } {
  const header = lines[start] ?? "";
  const match = HUNK_HEADER.exec(header);
  if (!match) {
    throw new PatchParseError(
      `bad hunk header "${header}"; expected "@@ -OLD_START,OLD_COUNT +NEW_START,NEW_COUNT @@"`,
      start + 1,
    );
  }
  const oldStart = Number(match[1]);
  const oldCount = match[2] === undefined ? 1 : Number(match[2]);
  const newStart = Number(match[3]);
  const newCount = match[4] === undefined ? 1 : Number(match[4]);
  const hunkLines: HunkLine[] = [];
  let oldSeen = 0;
  let newSeen = 0;
  let oldNoNewlineAtEnd = false;
  let newNoNewlineAtEnd = false;
  let i = start + 1;
  for (; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const countsDone = oldSeen >= oldCount && newSeen >= newCount;
    if (line.startsWith("\\")) {
      const previous = hunkLines.at(-1);
      if (previous?.kind !== "+") oldNoNewlineAtEnd = true;
      if (previous?.kind !== "-") newNoNewlineAtEnd = true;
      continue;
    }
    if (startsNextSection(lines, i, countsDone)) break;
    if (line === "") {
      // A blank line is an empty context line whose leading space got lost, unless the counts
      // say the hunk is complete (then it separates this hunk from what follows).
      if (countsDone) break;
      hunkLines.push({ kind: " ", text: "" });
      oldSeen++;
      newSeen++;
      continue;
    }
    const kind = line[0];
    if (kind !== " " && kind !== "-" && kind !== "+") break;
    // "-- " after a complete hunk is git format-patch's signature line, not a removal.
    if (countsDone && line === "-- ") break;
    hunkLines.push({ kind, text: line.slice(1) });
    if (kind !== "+") oldSeen++;
    if (kind !== "-") newSeen++;
  }
  if (hunkLines.length === 0) {
    throw new PatchParseError(`hunk "${header}" has no lines`, start + 1);
  }
  if (!hunkLines.some((line) => line.kind !== " ")) {
    throw new PatchParseError(`hunk "${header}" changes nothing (only context lines)`, start + 1);
  }
  return {
    hunk: {
      oldStart,
      oldLines: oldSeen,
      newStart,
      newLines: newSeen,
      header,
      lines: hunkLines,
      oldNoNewlineAtEnd,
      newNoNewlineAtEnd,
      patchLine: start + 1,
    },
    next: i,
  };
}

/**
 * Whether line `i` starts the next hunk or file. A "--- " line is only a file header once the
 * counts are satisfied: before that it is a removed line that itself starts with "-- ".
 */
function startsNextSection(lines: string[], i: number, countsDone: boolean): boolean {
  const line = lines[i] ?? "";
  if (line.startsWith("@@") || line.startsWith("diff --git ")) return true;
  return countsDone && line.startsWith("--- ") && (lines[i + 1] ?? "").startsWith("+++ ");
}
