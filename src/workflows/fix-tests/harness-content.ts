/**
 * Files that are harness only in part: package.json's `scripts` decide what `npm test` runs, but
 * its dependencies are the code's business; setup.cfg and pyproject.toml configure pytest and
 * coverage in a few sections among the packaging metadata. These are judged by comparing the
 * harness part of the base file with the patched one, so a dependency bump passes and a rewritten
 * `scripts.test` does not. Both versions are hostile text: they are only parsed and compared.
 */
import { isDeepStrictEqual } from "node:util";

/** package.json keys npm or a test runner reads to decide what runs: scripts and runner config. */
const packageJsonHarnessKeys = [
  "scripts",
  "config",
  "packageManager",
  "jest",
  "mocha",
  "ava",
  "c8",
  "nyc",
  "tap",
  "babel",
] as const;

function baseName(file: string): string {
  return file.slice(file.lastIndexOf("/") + 1);
}

/** Whether a file's harness is judged by content (package.json, setup.cfg, pyproject.toml). */
export function hasHarnessContent(file: string): boolean {
  return ["package.json", "setup.cfg", "pyproject.toml"].includes(baseName(file));
}

function parseJsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** `scripts.test`, `jest`: the harness keys that differ. An unreadable file counts as changed. */
function packageJsonChanges(base: string | undefined, patched: string | undefined): string[] {
  const before = base === undefined ? {} : parseJsonObject(base);
  const after = patched === undefined ? {} : parseJsonObject(patched);
  if (after === undefined) return ["not valid JSON after the change"];
  const changed: string[] = [];
  for (const key of packageJsonHarnessKeys) {
    const old: unknown = before?.[key];
    const now: unknown = after[key];
    if (isDeepStrictEqual(old, now)) continue;
    const oldScripts = old === undefined ? {} : old;
    const newScripts = now === undefined ? {} : now;
    if (key === "scripts" && isRecord(oldScripts) && isRecord(newScripts)) {
      const names = new Set([...Object.keys(oldScripts), ...Object.keys(newScripts)]);
      for (const name of [...names].sort()) {
        if (!isDeepStrictEqual(oldScripts[name], newScripts[name])) changed.push(`scripts.${name}`);
      }
    } else {
      changed.push(key);
    }
  }
  return changed;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The lines of an INI or TOML file that can reach pytest or coverage, in order: every line of a
 * section or table whose header names them, and any other line that names them (a dotted key
 * `tool.pytest.ini_options.addopts = …` under `[tool]` or the root, an inline table). A header is
 * any line that looks like one after trimming, which covers more than configparser and tomllib
 * read as headers: a doubtful line moves text into a harness section, never out of one. TOML's
 * `\u` escapes can spell a key without its letters, so a line holding one counts as well.
 */
function harnessLines(text: string | undefined, topic: RegExp): string[] {
  if (text === undefined) return [];
  const kept: string[] = [];
  let inHarnessSection = false;
  for (const raw of text.split(/\r?\n|\r/)) {
    // Leading blanks are kept: in an INI file they make a line part of the value above it.
    const line = raw.trimEnd();
    if (/^\[.*\]/.test(line.trim())) inHarnessSection = topic.test(line);
    if (inHarnessSection || topic.test(line)) kept.push(line);
  }
  return kept;
}

const pythonTestTopics = /pytest|coverage|\\[uU]/i;

/**
 * What part of the test harness a change to `file` touches, as short descriptions
 * (`scripts.test`, `[tool:pytest]`); empty when the change leaves the harness alone. `base` and
 * `patched` are the file's text before and after (undefined when absent).
 */
export function harnessContentChanges(
  file: string,
  base: string | undefined,
  patched: string | undefined,
): string[] {
  switch (baseName(file)) {
    case "package.json":
      return packageJsonChanges(base, patched);
    case "setup.cfg":
      return sameLines(
        harnessLines(base, pythonTestTopics),
        harnessLines(patched, pythonTestTopics),
      )
        ? []
        : ["[tool:pytest] or [coverage:*]"];
    case "pyproject.toml":
      return sameLines(
        harnessLines(base, pythonTestTopics),
        harnessLines(patched, pythonTestTopics),
      )
        ? []
        : ["[tool.pytest*] or [tool.coverage*]"];
    default:
      return [];
  }
}

function sameLines(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((line, index) => line === b[index]);
}
