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

type Kind = Op["kind"];

/**
 * Line diff: common prefix and suffix trimmed, then an exact LCS where the middle is small, and
 * patience-style anchoring on lines unique to both sides where it is not (a large file with
 * scattered changes still gets a small diff). Without anchors a large middle is shown as one
 * replacement.
 */
function diffLines(a: readonly string[], b: readonly string[]): Op[] {
  const kinds: Array<{ kind: Kind; text: string }> = [];
  diffRange(a, 0, a.length, b, 0, b.length, kinds);
  const ops: Op[] = [];
  let i = 0;
  let j = 0;
  for (const { kind, text } of kinds) {
    if (kind !== "+") i++;
    if (kind !== "-") j++;
    ops.push({ kind, text, oldNo: i, newNo: j });
  }
  return ops;
}

function diffRange(
  a: readonly string[],
  aLo: number,
  aHi: number,
  b: readonly string[],
  bLo: number,
  bHi: number,
  out: Array<{ kind: Kind; text: string }>,
): void {
  while (aLo < aHi && bLo < bHi && a[aLo] === b[bLo]) {
    out.push({ kind: " ", text: a[aLo] ?? "" });
    aLo++;
    bLo++;
  }
  const tail: Array<{ kind: Kind; text: string }> = [];
  while (aHi > aLo && bHi > bLo && a[aHi - 1] === b[bHi - 1]) {
    tail.push({ kind: " ", text: a[aHi - 1] ?? "" });
    aHi--;
    bHi--;
  }
  const n = aHi - aLo;
  const m = bHi - bLo;
  if (n === 0 || m === 0 || n * m <= MAX_LCS_CELLS) {
    lcsOps(a.slice(aLo, aHi), b.slice(bLo, bHi), out);
  } else {
    const anchors = uniqueAnchors(a, aLo, aHi, b, bLo, bHi);
    if (anchors.length === 0) {
      for (let i = aLo; i < aHi; i++) out.push({ kind: "-", text: a[i] ?? "" });
      for (let j = bLo; j < bHi; j++) out.push({ kind: "+", text: b[j] ?? "" });
    } else {
      let ai = aLo;
      let bj = bLo;
      for (const [x, y] of anchors) {
        diffRange(a, ai, x, b, bj, y, out);
        out.push({ kind: " ", text: a[x] ?? "" });
        ai = x + 1;
        bj = y + 1;
      }
      diffRange(a, ai, aHi, b, bj, bHi, out);
    }
  }
  out.push(...tail.reverse());
}

/** Pairs (i, j) of lines occurring once in each range, longest increasing chain (patience). */
function uniqueAnchors(
  a: readonly string[],
  aLo: number,
  aHi: number,
  b: readonly string[],
  bLo: number,
  bHi: number,
): Array<[number, number]> {
  const countA = new Map<string, { count: number; at: number }>();
  for (let i = aLo; i < aHi; i++) {
    const line = a[i] ?? "";
    const seen = countA.get(line);
    countA.set(line, { count: (seen?.count ?? 0) + 1, at: i });
  }
  const countB = new Map<string, { count: number; at: number }>();
  for (let j = bLo; j < bHi; j++) {
    const line = b[j] ?? "";
    const seen = countB.get(line);
    countB.set(line, { count: (seen?.count ?? 0) + 1, at: j });
  }
  const pairs: Array<[number, number]> = [];
  for (let i = aLo; i < aHi; i++) {
    const line = a[i] ?? "";
    const inB = countB.get(line);
    if (countA.get(line)?.count === 1 && inB?.count === 1) pairs.push([i, inB.at]);
  }
  // Longest increasing subsequence of j (pairs are already ordered by i).
  const tails: number[] = [];
  const previous = new Array<number>(pairs.length).fill(-1);
  for (let k = 0; k < pairs.length; k++) {
    const j = pairs[k]?.[1] ?? 0;
    let lo = 0;
    let hi = tails.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((pairs[tails[mid] ?? 0]?.[1] ?? 0) < j) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0) previous[k] = tails[lo - 1] ?? -1;
    tails[lo] = k;
  }
  const chain: Array<[number, number]> = [];
  for (let k = tails.at(-1) ?? -1; k !== -1; k = previous[k] ?? -1) {
    const pair = pairs[k];
    if (pair) chain.push(pair);
  }
  return chain.reverse();
}

function lcsOps(
  a: readonly string[],
  b: readonly string[],
  out: Array<{ kind: Kind; text: string }>,
): void {
  const n = a.length;
  const m = b.length;
  // lcs[i][j] = LCS length of a[i..] and b[j..], in one flat array.
  const lcs = new Uint32Array((n + 1) * (m + 1));
  const at = (i: number, j: number): number => lcs[i * (m + 1) + j] ?? 0;
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * (m + 1) + j] =
        a[i] === b[j] ? at(i + 1, j + 1) + 1 : Math.max(at(i + 1, j), at(i, j + 1));
    }
  }
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push({ kind: " ", text: a[i] ?? "" });
      i++;
      j++;
    } else if (i < n && (j >= m || at(i + 1, j) >= at(i, j + 1))) {
      out.push({ kind: "-", text: a[i] ?? "" });
      i++;
    } else {
      out.push({ kind: "+", text: b[j] ?? "" });
      j++;
    }
  }
}
