import { sumOf, type TestCountParser } from "./parser.js";

/**
 * TAP, and node:test, which prints the same counts with either reporter: `# tests 5`, `# pass 2`,
 * `# fail 1`, `# cancelled 0`, `# skipped 1`, `# todo 1` (TAP, Node 18's default and tape's) or
 * `ℹ tests 5` … (spec, Node 20's default on a terminal). Without those comments, plain TAP is
 * counted from its top-level `ok` / `not ok` lines, leaving out `# SKIP` and `# TODO`.
 */
function fromSummaryComments(lines: readonly string[]): number | undefined {
  const counts: number[] = [];
  lines.forEach((line, at) => {
    if (!/^(?:#|ℹ) tests \d+$/.test(line)) return;
    let ran = 0;
    for (const next of lines.slice(at + 1, at + 8)) {
      const match = /^(?:#|ℹ) (pass|fail|cancelled) (\d+)$/.exec(next);
      if (match) ran += Number(match[2]);
    }
    counts.push(ran);
  });
  return sumOf(counts);
}

function fromTestPoints(lines: readonly string[]): number | undefined {
  if (!lines.some((line) => /^1\.\.\d+/.test(line) || line === "TAP version 13")) return undefined;
  return lines.filter((line) => /^(?:not )?ok\b/.test(line) && !/#\s*(?:SKIP|TODO)\b/i.test(line))
    .length;
}

export const tapParser: TestCountParser = {
  runner: "TAP",
  count(lines) {
    return fromSummaryComments(lines) ?? fromTestPoints(lines);
  },
};
