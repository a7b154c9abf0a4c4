import { normalizeText, restoreText } from "../text-format.js";
import type { Hunk } from "./types.js";

/** Why one hunk did not apply, with enough detail for the model to fix it. */
export interface HunkFailure {
  /** 0-based index of the hunk within its file. */
  index: number;
  header: string;
  /** 1-based line in the patch text. */
  patchLine: number;
  reason: string;
}

export type ApplyHunksResult =
  | {
      ok: true;
      text: string;
      /** Hunks that applied at a shifted line or with whitespace fuzz. */ notes: string[];
    }
  | { ok: false; failures: HunkFailure[] };

type Compare = (fileLine: string, patchLine: string) => boolean;

/** Exact first; then ignoring trailing whitespace; then ignoring all surrounding whitespace. */
const passes: Array<{ name: string; equal: Compare }> = [
  { name: "exact", equal: (a, b) => a === b },
  { name: "ignoring trailing whitespace", equal: (a, b) => a.trimEnd() === b.trimEnd() },
  { name: "ignoring indentation", equal: (a, b) => a.trim() === b.trim() },
];

/**
 * Applies hunks to `original` (text as read). Context is searched near the line the header names
 * (patches are often off by a few lines), never before the previous hunk. Matched context keeps
 * the file's own lines, so whitespace fuzz never rewrites unchanged lines. BOM and line endings
 * are preserved; the final newline follows the patch's `\ No newline at end of file` markers.
 */
export function applyHunks(original: string, hunks: readonly Hunk[]): ApplyHunksResult {
  const { body, layout } = normalizeText(original);
  const lines = body === "" ? [] : body.split("\n");
  if (layout.finalNewline) lines.pop();
  let finalNewline = layout.finalNewline || body === "";
  const failures: HunkFailure[] = [];
  const notes: string[] = [];
  let offset = 0;
  let floor = 0;

  hunks.forEach((hunk, index) => {
    const oldBlock = hunk.lines.filter((l) => l.kind !== "+").map((l) => l.text);
    const expected = Math.max(
      0,
      (oldBlock.length === 0 ? hunk.oldStart : hunk.oldStart - 1) + offset,
    );
    const found = locate(lines, oldBlock, expected, floor);
    if (!found) {
      failures.push({
        index,
        header: hunk.header,
        patchLine: hunk.patchLine,
        reason: explainMiss(lines, oldBlock, expected, floor),
      });
      return;
    }
    const { at, pass } = found;
    if (at !== expected || pass !== "exact") {
      const shift = at - expected;
      const where =
        shift === 0
          ? ""
          : ` (${Math.abs(shift)} line(s) ${shift > 0 ? "later" : "earlier"} than its header says)`;
      notes.push(
        `hunk ${index + 1} (${hunk.header}) applied at line ${at + 1}${where}${pass === "exact" ? "" : `, ${pass}`}`,
      );
    }
    const replacement: string[] = [];
    let cursor = at;
    for (const line of hunk.lines) {
      if (line.kind === " ") replacement.push(lines[cursor++] ?? line.text);
      else if (line.kind === "-") cursor++;
      else replacement.push(line.text);
    }
    const touchesEnd = at + oldBlock.length === lines.length;
    lines.splice(at, oldBlock.length, ...replacement);
    if (touchesEnd && hunk.oldNoNewlineAtEnd !== hunk.newNoNewlineAtEnd) {
      finalNewline = !hunk.newNoNewlineAtEnd;
    } else if (touchesEnd && body === "" && hunk.newNoNewlineAtEnd) {
      finalNewline = false;
    }
    offset += replacement.length - oldBlock.length;
    floor = at + replacement.length;
  });

  if (failures.length > 0) return { ok: false, failures };
  const newBody = lines.length === 0 ? "" : lines.join("\n") + (finalNewline ? "\n" : "");
  return { ok: true, text: restoreText(newBody, { ...layout, finalNewline }), notes };
}

function locate(
  lines: readonly string[],
  block: readonly string[],
  expected: number,
  floor: number,
): { at: number; pass: string } | undefined {
  if (block.length === 0) {
    const at = Math.min(Math.max(expected, floor), lines.length);
    return { at, pass: "exact" };
  }
  for (const { name, equal } of passes) {
    // Nearest match to where the header says, searching outward, never before `floor`.
    const maxDistance = Math.max(lines.length, 1);
    for (let distance = 0; distance <= maxDistance; distance++) {
      for (const at of distance === 0 ? [expected] : [expected - distance, expected + distance]) {
        if (at < floor || at + block.length > lines.length) continue;
        if (matchesAt(lines, block, at, equal)) return { at, pass: name };
      }
    }
  }
  return undefined;
}

function matchesAt(
  lines: readonly string[],
  block: readonly string[],
  at: number,
  equal: Compare,
): boolean {
  for (let k = 0; k < block.length; k++) {
    if (!equal((lines[at + k] ?? "").replace(/\r$/, ""), (block[k] ?? "").replace(/\r$/, ""))) {
      return false;
    }
  }
  return true;
}

/** Where the hunk came closest to matching, and the first line that differs there. */
function explainMiss(
  lines: readonly string[],
  block: readonly string[],
  expected: number,
  floor: number,
): string {
  if (lines.length === 0) {
    return "the file is empty, but the hunk expects existing lines";
  }
  let best = { at: -1, score: -1 };
  const last = Math.max(floor, lines.length - block.length);
  for (let at = floor; at <= last; at++) {
    let score = 0;
    for (let k = 0; k < block.length; k++) {
      if ((lines[at + k] ?? "").trim() === (block[k] ?? "").trim()) score++;
    }
    const better =
      score > best.score ||
      (score === best.score && Math.abs(at - expected) < Math.abs(best.at - expected));
    if (better) best = { at, score };
  }
  if (best.score <= 0) {
    return `its context/removed lines were not found anywhere in the file (first expected line: ${JSON.stringify(block[0] ?? "")}). Read the file again and rebuild the hunk from its current content.`;
  }
  const k = block.findIndex((text, i) => (lines[best.at + i] ?? "").trim() !== text.trim());
  const fileLine = lines[best.at + k];
  return (
    `closest match at line ${best.at + 1} (${best.score} of ${block.length} lines agree), but hunk line ${k + 1} expects ${JSON.stringify(block[k] ?? "")} ` +
    `where the file has ${fileLine === undefined ? "end of file" : JSON.stringify(fileLine)} (line ${best.at + k + 1}). Read the file again and fix the hunk.`
  );
}
