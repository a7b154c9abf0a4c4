import { CordonError, ExitCode, messageOf } from "../common/index.js";
import { checkDelta, decodeBase85Line, inflateExactly } from "./git-binary.js";
import { displayName, headerNameSplits, readName } from "./git-path.js";

/**
 * The strict reader of patches taken from a sandbox. A patch is written from the agent's files, so
 * it is hostile bytes: this reads it as `git apply` will and refuses everything else, and what it
 * returns is what the checks before apply and fix-tests judge.
 *
 * Why it cannot be tricked: it is a state machine, not a line scanner. Per file it takes the
 * `diff --git` line, then only git's extended headers (each at most once), then `---`/`+++` directly
 * before the first hunk, then hunks whose `@@ -a,b +c,d @@` counts are followed line by line, so a
 * content line (an added `++ b/x`) is always consumed as content and can never be read as a header.
 * Names come only from `diff --git`, rename and copy headers, and must agree with `---`/`+++`.
 * Binary hunks are decoded (base85, inflate) or refused. Any line it does not expect is an error.
 */

/** One file a patch touches. */
export interface PatchedFile {
  /** Path relative to the workspace root, after the change (the old path for a deletion). */
  path: string;
  /** For a rename or copy: where it came from. */
  from?: string | undefined;
  change: "added" | "modified" | "deleted" | "renamed" | "copied" | "mode";
  binary: boolean;
  /**
   * Git file mode after the change, e.g. "100644", "100755", "120000" (symlink), from a mode line
   * or an `index … <mode>` line. Undefined for a deletion, and for a rename or copy that changes
   * no content (git writes no mode then: the mode is the source's, on disk).
   */
  mode?: string | undefined;
  /** For a file that is a symlink after the change (mode 120000): its new target. */
  symlinkTarget?: string | undefined;
}

/** A patch that is not exactly what `git diff` writes. Nothing of it may be applied. */
export class PatchParseError extends CordonError {
  readonly code = "patch_unreadable";
  // A refusal of the agent's changes, like an unsafe path (PolicyDeniedError), not a usage error:
  // the user typed nothing wrong, and scripts see one exit code for "cordon refused the changes".
  readonly exitCode = ExitCode.policy;
  constructor(
    readonly reason: string,
    /** 1-based line of the patch where reading stopped. */
    readonly line: number,
  ) {
    super(`the changes are not a patch cordon can check (line ${line}): ${reason}`, {
      fix: "nothing was written; look at the changes inside the sandbox (`cordon exec -- git status`) and copy what you trust by hand",
    });
  }
}

const modes = new Set(["100644", "100755", "120000", "160000"]);
const symlinkMode = "120000";

/** Git's extended header lines, each `<name> <value>`. */
const extendedHeaders = [
  "old mode",
  "new mode",
  "deleted file mode",
  "new file mode",
  "similarity index",
  "dissimilarity index",
  "rename from",
  "rename to",
  "copy from",
  "copy to",
  "index",
] as const;
type ExtendedHeader = (typeof extendedHeaders)[number];

class Lines {
  private at = 0;
  constructor(private readonly lines: readonly string[]) {}
  peek(): string | undefined {
    return this.lines[this.at];
  }
  next(): string | undefined {
    const line = this.lines[this.at];
    this.at += 1;
    return line;
  }
  /** 1-based number of the line `peek` returns. */
  get number(): number {
    return this.at + 1;
  }
  fail(reason: string, line = this.number): never {
    throw new PatchParseError(reason, line);
  }
}

function shown(line: string): string {
  const text = displayName(line);
  return JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);
}

/**
 * The files a git patch (as `git diff --binary --full-index` writes it, with a/ and b/ prefixes)
 * touches. Throws PatchParseError for anything else. An empty patch touches nothing. A string is
 * taken as UTF-8 text.
 */
export function parsePatch(patch: Uint8Array | string): PatchedFile[] {
  // latin1: one char per byte, so names in any encoding and binary lines pass through unchanged.
  const text = Buffer.from(typeof patch === "string" ? Buffer.from(patch) : patch).toString(
    "latin1",
  );
  if (text === "") return [];
  const all = text.split("\n");
  if (all.pop() !== "") throw new PatchParseError("the last line has no newline", all.length + 1);
  const lines = new Lines(all);
  const files: PatchedFile[] = [];
  for (let line = lines.peek(); line !== undefined; line = lines.peek()) {
    if (/^[ +\-\\]/.test(line)) {
      lines.fail(`a content line ${shown(line)} outside any hunk (a hunk's line counts are wrong)`);
    }
    if (!line.startsWith("diff --git ")) {
      lines.fail(`expected a \`diff --git\` line, found ${shown(line)}`);
    }
    files.push(readFile(lines));
  }
  return files;
}

function readHeaders(lines: Lines): Map<ExtendedHeader, string> {
  const headers = new Map<ExtendedHeader, string>();
  for (;;) {
    const line = lines.peek() ?? "";
    const name = extendedHeaders.find((header) => line.startsWith(`${header} `));
    if (name === undefined) return headers;
    if (headers.has(name)) lines.fail(`a second "${name}" line for one file`);
    headers.set(name, line.slice(name.length + 1));
    lines.next();
  }
}

function readMode(lines: Lines, value: string | undefined, line: number): string | undefined {
  if (value === undefined) return undefined;
  if (!modes.has(value)) lines.fail(`${shown(value)} is not a file mode git writes`, line);
  return value;
}

interface FileHeader {
  oldName: string;
  newName: string;
  change: PatchedFile["change"];
  oldMode: string | undefined;
  newMode: string | undefined;
  /** A rename or copy with no content change: git writes no mode for it. */
  similarity100: boolean;
}

/** The extended headers of one file and the names they and its `diff --git` line agree on. */
function readFileHeader(lines: Lines): FileHeader {
  const start = lines.number;
  const splits = headerNameSplits((lines.next() ?? "").slice("diff --git ".length));
  const headers = readHeaders(lines);
  const at = (header: ExtendedHeader): string | undefined => headers.get(header);
  const fail = (reason: string): never => lines.fail(reason, start);

  const index = at("index");
  const indexMatch =
    index === undefined ? undefined : /^[0-9a-f]{7,64}\.\.[0-9a-f]{7,64}(?: (\d+))?$/.exec(index);
  if (index !== undefined && !indexMatch) fail(`the index line ${shown(index)} is not git's`);
  const indexMode = readMode(lines, indexMatch?.[1], start);
  for (const header of ["similarity index", "dissimilarity index"] as const) {
    const value = at(header);
    if (value !== undefined && !/^\d{1,3}%$/.test(value)) fail(`a bad ${header} ${shown(value)}`);
  }

  const added = readMode(lines, at("new file mode"), start);
  const deleted = readMode(lines, at("deleted file mode"), start);
  const oldModeLine = readMode(lines, at("old mode"), start);
  const newModeLine = readMode(lines, at("new mode"), start);
  const rename = at("rename from") !== undefined || at("rename to") !== undefined;
  const copy = at("copy from") !== undefined || at("copy to") !== undefined;
  const kinds = [added, deleted, rename || copy ? "move" : undefined].filter(Boolean);
  if (kinds.length > 1 || (rename && copy)) {
    fail("one file is said to be added, deleted, renamed or copied at once");
  }
  if ((oldModeLine === undefined) !== (newModeLine === undefined)) {
    fail("an old mode line without a new mode line, or the other way round");
  }
  if ((added ?? deleted) !== undefined && (oldModeLine ?? indexMode) !== undefined) {
    fail("an added or deleted file also has a mode change or an index mode");
  }
  if (oldModeLine !== undefined && indexMode !== undefined) {
    fail("a mode change and an index line with a mode");
  }

  let oldName: string;
  let newName: string;
  if (rename || copy) {
    const verb = rename ? "rename" : "copy";
    const from = readName(at(`${verb} from`) ?? "");
    const to = readName(at(`${verb} to`) ?? "");
    if (!from || !to) fail(`a ${verb} needs readable "${verb} from" and "${verb} to" lines`);
    oldName = from ?? "";
    newName = to ?? "";
    if (!splits.some(([a, b]) => a === `a/${oldName}` && b === `b/${newName}`)) {
      fail(
        `the \`diff --git\` line does not name the ${verb} from ${shown(oldName)} to ${shown(newName)}`,
      );
    }
  } else {
    const same = splits.find(
      ([a, b]) => a.startsWith("a/") && b.startsWith("b/") && a.slice(2) === b.slice(2),
    );
    if (!same) {
      fail(
        "the `diff --git` line does not name one file as a/<path> b/<path> (cordon takes patches made with a/ and b/ prefixes; other prefixes such as diff.mnemonicPrefix's i/ and w/ are refused)",
      );
    }
    oldName = (same?.[0] ?? "").slice(2);
    newName = oldName;
  }

  if (at("similarity index") !== undefined && !rename && !copy) {
    fail("a similarity index for a file that is neither renamed nor copied");
  }
  const similarity100 = (rename || copy) && at("similarity index") === "100%";
  return {
    oldName,
    newName,
    change: added
      ? "added"
      : deleted
        ? "deleted"
        : rename
          ? "renamed"
          : copy
            ? "copied"
            : oldModeLine
              ? "mode"
              : "modified",
    oldMode: added ? undefined : (deleted ?? oldModeLine ?? indexMode),
    newMode: deleted ? undefined : (added ?? newModeLine ?? indexMode),
    similarity100,
  };
}

/** What the content part of one file says: hunks or a binary patch, and a symlink's target. */
interface FileContent {
  kind: "none" | "text" | "binary";
  /** The new content when it could be read whole (symlinks only). */
  newContent?: string | undefined;
}

function readFile(lines: Lines): PatchedFile {
  const start = lines.number;
  const header = readFileHeader(lines);
  const content = readContent(lines, header);
  const symlink = header.newMode === symlinkMode;

  if (header.oldMode !== undefined && header.newMode !== undefined) {
    if ((header.oldMode === symlinkMode) !== symlink) {
      lines.fail(
        `${shown(header.newName)} turns between a symlink and a file in place (git diff writes that as a deletion and an addition)`,
        start,
      );
    }
  }
  if (header.change === "modified" && content.kind === "none") {
    lines.fail(`the entry for ${shown(header.newName)} changes nothing`, start);
  }
  const movedAsIs = header.similarity100 && content.kind === "none";
  if (header.change !== "deleted" && header.newMode === undefined && !movedAsIs) {
    lines.fail(
      `the change to ${shown(header.newName)} does not say the file's mode (no mode or \`index … <mode>\` line)`,
      start,
    );
  }
  let symlinkTarget: string | undefined;
  if (symlink && !movedAsIs) {
    // A new empty symlink has no content at all; the checks refuse its empty target.
    symlinkTarget = content.kind === "none" ? "" : content.newContent;
    if (symlinkTarget === undefined) {
      lines.fail(
        `the patch does not show the whole new target of the symlink ${shown(header.newName)}`,
        start,
      );
    }
  }
  return {
    path: displayName(header.change === "deleted" ? header.oldName : header.newName),
    from:
      header.change === "renamed" || header.change === "copied"
        ? displayName(header.oldName)
        : undefined,
    change: header.change,
    binary: content.kind === "binary",
    mode: header.newMode,
    symlinkTarget: symlinkTarget === undefined ? undefined : displayName(symlinkTarget),
  };
}

function readContent(lines: Lines, header: FileHeader): FileContent {
  const line = lines.peek();
  if (line === "GIT binary patch") {
    lines.next();
    return { kind: "binary", newContent: readBinary(lines, header.newMode === symlinkMode) };
  }
  if (line?.startsWith("Binary files ")) {
    lines.fail("a binary change without its content (the patch was made without --binary)");
  }
  if (line === undefined || line.startsWith("diff --git ")) return { kind: "none" };
  if (!line.startsWith("--- ")) lines.fail(`${shown(line)} is not a header line git writes`);

  const fileLine = (marker: "---" | "+++", expected: string): void => {
    const raw = (lines.peek() ?? "").startsWith(`${marker} `)
      ? (lines.peek() ?? "").slice(4)
      : undefined;
    if (raw === undefined) lines.fail(`expected a \`${marker}\` line`);
    // git ends a name holding a space with a tab on these lines (for GNU patch).
    const name = readName(
      raw?.includes(" ") && raw.endsWith("\t") ? raw.slice(0, -1) : (raw ?? ""),
    );
    if (name !== expected) {
      lines.fail(
        `the \`${marker}\` line names ${shown(name ?? raw ?? "")}, not ${shown(expected)} as its \`diff --git\` line does`,
      );
    }
    lines.next();
  };
  fileLine("---", header.change === "added" ? "/dev/null" : `a/${header.oldName}`);
  fileLine("+++", header.change === "deleted" ? "/dev/null" : `b/${header.newName}`);
  if (!(lines.peek() ?? "").startsWith("@@ "))
    lines.fail("expected a hunk (`@@`) after the `+++` line");

  const keepNew = header.newMode === symlinkMode;
  const hunks: Hunk[] = [];
  while ((lines.peek() ?? "").startsWith("@@ ")) hunks.push(readHunk(lines, keepNew));
  for (const hunk of hunks) {
    if (header.change === "added" && hunk.oldCount > 0)
      lines.fail("an added file's hunk has old lines", hunk.line);
    if (header.change === "deleted" && hunk.newCount > 0)
      lines.fail("a deleted file's hunk has new lines", hunk.line);
  }
  const only = hunks.length === 1 ? hunks[0] : undefined;
  // A symlink's content is its target, one line with no newline: the hunk must show it whole.
  const wholeSymlink =
    only !== undefined &&
    only.newStart === 1 &&
    only.newCount === 1 &&
    only.newLines.length === 1 &&
    only.newEndsWithoutNewline;
  return { kind: "text", newContent: wholeSymlink ? only.newLines[0] : undefined };
}

interface Hunk {
  line: number;
  oldCount: number;
  newStart: number;
  newCount: number;
  /** The new side's lines without their marker, kept only when asked (symlinks). */
  newLines: string[];
  newEndsWithoutNewline: boolean;
}

function readHunk(lines: Lines, keepNew: boolean): Hunk {
  const line = lines.number;
  const match = /^@@ -(\d{1,9})(?:,(\d{1,9}))? \+(\d{1,9})(?:,(\d{1,9}))? @@/.exec(
    lines.next() ?? "",
  );
  if (!match) lines.fail("a hunk header that is not `@@ -a,b +c,d @@`", line);
  const count = (value: string | undefined): number => (value === undefined ? 1 : Number(value));
  const hunk: Hunk = {
    line,
    oldCount: count(match?.[2]),
    newStart: Number(match?.[3]),
    newCount: count(match?.[4]),
    newLines: [],
    newEndsWithoutNewline: false,
  };
  if (hunk.oldCount === 0 && hunk.newCount === 0) lines.fail("an empty hunk", line);
  let oldLeft = hunk.oldCount;
  let newLeft = hunk.newCount;
  let last: string | undefined;
  // The counts decide where the hunk ends: every line up to them is content, whatever it says.
  while (oldLeft > 0 || newLeft > 0) {
    const content = lines.peek();
    if (content === undefined)
      lines.fail(`the hunk at line ${line} ends before its line counts say`);
    const marker = content?.[0];
    if (marker === " " || marker === "-") oldLeft -= 1;
    if (marker === " " || marker === "+") newLeft -= 1;
    if (marker === "\\" && last !== undefined) {
      readNoNewline(lines, hunk, last);
      last = undefined;
      continue;
    }
    if ((marker !== " " && marker !== "-" && marker !== "+") || oldLeft < 0 || newLeft < 0) {
      lines.fail(
        `the hunk at line ${line} does not match its line counts at ${shown(content ?? "")}`,
      );
    }
    if (keepNew && marker !== "-") hunk.newLines.push((content ?? "").slice(1));
    last = marker;
    lines.next();
  }
  if ((lines.peek() ?? "").startsWith("\\") && last !== undefined) readNoNewline(lines, hunk, last);
  return hunk;
}

/** `\ No newline at end of file` (worded in the locale git ran in) after a content line. */
function readNoNewline(lines: Lines, hunk: Hunk, after: string): void {
  const line = lines.next() ?? "";
  if (!line.startsWith("\\ ") || line.length < 12)
    lines.fail(`a line ${shown(line)} inside a hunk`);
  if (after !== "-") hunk.newEndsWithoutNewline = true;
}

/**
 * A `GIT binary patch`: the forward hunk, then optionally the reverse one. Returns the new content
 * when the forward hunk is a literal and `keep` asks for it (a symlink's target).
 */
function readBinary(lines: Lines, keep: boolean): string | undefined {
  const forward = readBinaryHunk(lines);
  if (forward === undefined) lines.fail("a `GIT binary patch` without a `literal` or `delta` hunk");
  if (/^(literal|delta) /.test(lines.peek() ?? "")) readBinaryHunk(lines);
  if (!keep) return undefined;
  if (forward?.kind === "delta") {
    lines.fail("a symlink changed by a binary delta: its new target cannot be read from the patch");
  }
  return Buffer.from(forward?.data ?? []).toString("latin1");
}

function readBinaryHunk(lines: Lines): { kind: "literal" | "delta"; data: Uint8Array } | undefined {
  const start = lines.number;
  const match = /^(literal|delta) (\d{1,12})$/.exec(lines.peek() ?? "");
  if (!match) return undefined;
  lines.next();
  const chunks: Uint8Array[] = [];
  for (let line = lines.next(); line !== ""; line = lines.next()) {
    if (line === undefined) lines.fail(`the binary hunk at line ${start} is cut short`);
    try {
      chunks.push(decodeBase85Line(line ?? ""));
    } catch (error) {
      lines.fail(messageOf(error), lines.number - 1);
    }
  }
  if (chunks.length === 0) lines.fail("an empty binary hunk", start);
  try {
    const data = inflateExactly(Buffer.concat(chunks), Number(match?.[2]));
    if (match?.[1] === "delta") checkDelta(data);
    return { kind: match?.[1] === "delta" ? "delta" : "literal", data };
  } catch (error) {
    return lines.fail(messageOf(error), start);
  }
}
