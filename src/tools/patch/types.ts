/** One line of a hunk: context (" "), removed ("-") or added ("+"), without the prefix. */
export interface HunkLine {
  kind: " " | "-" | "+";
  text: string;
}

export interface Hunk {
  /** 1-based start line in the old file as the header says (0 for an empty old side). */
  oldStart: number;
  oldLines: number;
  newStart: number;
  newLines: number;
  /** The `@@ … @@` line as written, for reports. */
  header: string;
  lines: HunkLine[];
  /** `\ No newline at end of file` followed the old side's last line. */
  oldNoNewlineAtEnd: boolean;
  newNoNewlineAtEnd: boolean;
  /** 1-based line of the header in the patch text. */
  patchLine: number;
}

export type FilePatchKind = "add" | "delete" | "modify" | "rename";

/** The change to one file. Paths are as the patch names them, prefixes (a/, b/) removed. */
export interface FilePatch {
  kind: FilePatchKind;
  /** Undefined for an added file. */
  oldPath: string | undefined;
  /** Undefined for a deleted file. */
  newPath: string | undefined;
  hunks: Hunk[];
  /** 1-based line in the patch text where this file's header starts. */
  patchLine: number;
}

/** The patch text is not a unified diff cordon can read; `line` is 1-based. */
export class PatchParseError extends Error {
  constructor(
    message: string,
    readonly line: number,
  ) {
    super(`line ${line}: ${message}`);
    this.name = "PatchParseError";
  }
}
