import { mkdir, rename, writeFile } from "node:fs/promises";
import path from "node:path";

/** What `cordon fix-tests` writes, always — also on limits, errors and Ctrl-C. */
export interface FixTestsArtifacts {
  /** result.json */
  result: unknown;
  /** transcript.jsonl: the agent session, one message a line. */
  transcriptLines: readonly string[];
  /** changes.patch: the agent's changes as a git patch (empty when none). */
  patch: Uint8Array;
  /** summary.md: for a CI step summary. */
  summary: string;
  /** More files, by name (each attempt's patch and transcript), written before result.json. */
  extra?: readonly (readonly [string, string | Uint8Array])[] | undefined;
}

/** JSONL text of lines, each ended. */
export function linesOf(lines: readonly string[]): string {
  return lines.map((line) => `${line}\n`).join("");
}

/** Each file lands whole or not at all (temp file + rename), so a CI step never reads half of one. */
async function writeAtomically(file: string, data: string | Uint8Array): Promise<void> {
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, data);
  await rename(temp, file);
}

export async function writeArtifacts(
  outDir: string,
  artifacts: FixTestsArtifacts,
): Promise<string[]> {
  await mkdir(outDir, { recursive: true });
  const files: [string, string | Uint8Array][] = [
    ["changes.patch", artifacts.patch],
    ["transcript.jsonl", linesOf(artifacts.transcriptLines)],
    ["summary.md", artifacts.summary],
    ...(artifacts.extra ?? []).map(([name, data]): [string, string | Uint8Array] => [name, data]),
    // Last: its presence means the others are complete.
    ["result.json", `${JSON.stringify(artifacts.result, null, 2)}\n`],
  ];
  for (const [name, data] of files) await writeAtomically(path.join(outDir, name), data);
  return files.map(([name]) => path.join(outDir, name));
}
