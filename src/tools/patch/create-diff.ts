/**
 * Unified diffs of two texts, line by line: what `edit` shows the model after a change, and what
 * the patch tests use to produce patches that must round-trip through `applyHunks`.
 */

export interface CreateDiffOptions {
  oldText: string;
  newText: string;
  /** Names on the ---/+++ lines; undefined means /dev/null. */
  oldPath?: string | undefined;
  newPath?: string | undefined;
  /** Context lines around each change. Default 3. */
  context?: number | undefined;
}

type Op = { kind: " " | "-" | "+"; text: string; oldNo: number; newNo: number };

/** Above this many cells the middle is shown as one replacement instead of a minimal diff. */
const MAX_LCS_CELLS = 4_000_000;

export function createUnifiedDiff(options: CreateDiffOptions): string {
  const context = options.context ?? 3;
  const a = splitLines(options.oldText);
  const b = splitLines(options.newText);
  const ops = diffLines(a, b);
  if (!ops.some((op) => op.kind !== " ")) return "";
  const out = [
    `--- ${options.oldPath === undefined ? "/dev/null" : `a/${options.oldPath}`}`,
    `+++ ${options.newPath === undefined ? "/dev/null" : `b/${options.newPath}`}`,
  ];
  const changed = ops.map((op, i) => (op.kind === " " ? -1 : i)).filter((i) => i >= 0);
  let start = 0;
  while (start < changed.length) {
    let end = start;
    while (
      end + 1 < changed.length &&
      (changed[end + 1] ?? 0) - (changed[end] ?? 0) <= 2 * context + 1
    ) {
      end++;
    }
    const from = Math.max(0, (changed[start] ?? 0) - context);
    const to = Math.min(ops.length, (changed[end] ?? 0) + context + 1);
    const slice = ops.slice(from, to);
    const oldCount = slice.filter((op) => op.kind !== "+").length;
    const newCount = slice.filter((op) => op.kind !== "-").length;
    // An empty side names the line after which the change goes (git's convention).
    const first = slice[0];
    const oldStart = slice.find((op) => op.kind !== "+")?.oldNo ?? first?.oldNo ?? 0;
    const newStart = slice.find((op) => op.kind !== "-")?.newNo ?? first?.newNo ?? 0;
    out.push(`@@ -${oldStart},${oldCount} +${newStart},${newCount} @@`);
    for (const op of slice) {
      if (op.text.endsWith(NO_NEWLINE)) {
        out.push(
          `${op.kind}${op.text.slice(0, -NO_NEWLINE.length)}`,
          "\\ No newline at end of file",
        );
      } else {
        out.push(`${op.kind}${op.text}`);
      }
    }
    start = end + 1;
  }
  return `${out.join("\n")}\n`;
}

/**
 * Marks a last line that has no newline, so "x" and "x\n" differ as lines do in git (the pair
 * shows as removed and added) and the marker line can be emitted after it.
 */
const NO_NEWLINE = "\u0000no-newline";

function splitLines(text: string): string[] {
  if (text === "") return [];
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  else lines[lines.length - 1] += NO_NEWLINE;
  return lines;
}

/** Line diff: common prefix and suffix, then an LCS of the middle (bounded in size). */
function diffLines(a: readonly string[], b: readonly string[]): Op[] {
  let prefix = 0;
  while (prefix < a.length && prefix < b.length && a[prefix] === b[prefix]) prefix++;
  let suffix = 0;
  while (
    suffix < a.length - prefix &&
    suffix < b.length - prefix &&
    a[a.length - 1 - suffix] === b[b.length - 1 - suffix]
  ) {
    suffix++;
  }
  const ops: Op[] = [];
  for (let i = 0; i < prefix; i++)
    ops.push({ kind: " ", text: a[i] ?? "", oldNo: i + 1, newNo: i + 1 });
  const midA = a.slice(prefix, a.length - suffix);
  const midB = b.slice(prefix, b.length - suffix);
  for (const op of middleOps(midA, midB)) {
    ops.push({ ...op, oldNo: op.oldNo + prefix, newNo: op.newNo + prefix });
  }
  for (let k = suffix; k > 0; k--) {
    const i = a.length - k;
    const j = b.length - k;
    ops.push({ kind: " ", text: a[i] ?? "", oldNo: i + 1, newNo: j + 1 });
  }
  return ops;
}

function middleOps(a: readonly string[], b: readonly string[]): Op[] {
  const n = a.length;
  const m = b.length;
  if (n * m > MAX_LCS_CELLS) {
    return [
      ...a.map((text, i) => ({ kind: "-" as const, text, oldNo: i + 1, newNo: 0 })),
      ...b.map((text, j) => ({ kind: "+" as const, text, oldNo: n, newNo: j + 1 })),
    ];
  }
  // lcs[i][j] = LCS length of a[i..] and b[j..], in one flat array.
  const lcs = new Uint32Array((n + 1) * (m + 1));
  const at = (i: number, j: number): number => lcs[i * (m + 1) + j] ?? 0;
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * (m + 1) + j] =
        a[i] === b[j] ? at(i + 1, j + 1) + 1 : Math.max(at(i + 1, j), at(i, j + 1));
    }
  }
  const ops: Op[] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      ops.push({ kind: " ", text: a[i] ?? "", oldNo: i + 1, newNo: j + 1 });
      i++;
      j++;
    } else if (i < n && (j >= m || at(i + 1, j) >= at(i, j + 1))) {
      ops.push({ kind: "-", text: a[i] ?? "", oldNo: i + 1, newNo: j });
      i++;
    } else {
      ops.push({ kind: "+", text: b[j] ?? "", oldNo: i, newNo: j + 1 });
      j++;
    }
  }
  return ops;
}
