/**
 * Verification against the base harness. In the verify sandbox (a fresh seeded copy, where nothing
 * has run yet) the patch is applied, and then every protected path it touched that the run does
 * not accept from the agent is put back as it was in the base: the base's bytes and mode, or
 * removed when the base had no such file. The tests then run the way the repository runs them,
 * so a harness edit the check before verification missed still cannot make verification pass.
 *
 * Which paths the patch touches is taken twice: from the strict parser (`files`) and from git
 * itself (`git apply --numstat`, the program that writes them), and the union is judged. The
 * files whose harness is only a part of them (package.json `scripts`, …) are compared before and
 * after the patch here, since only this copy holds both versions.
 */
import { randomUUID } from "node:crypto";

import type { PatchedFile } from "../../changes/index.js";
import { SandboxError } from "../../common/index.js";
import type { ExecResult, Sandbox } from "../../sandbox/index.js";
import { quoteShellArg } from "../../tools/index.js";
import { harnessContentChanges, hasHarnessContent } from "./harness-content.js";
import { protectedKindOf, type ProtectedKind, type ProtectionRules } from "./protected-files.js";

/** Kinds whose changes `--allow-test-changes` lets verification run with. Harness is never one. */
const acceptedWithTestChanges: ReadonlySet<ProtectedKind> = new Set(["test", "ci", "lockfile"]);

/** The largest package.json/setup.cfg/pyproject.toml read for the content check. */
const contentLimitBytes = 4 * 1024 * 1024;

export interface BaseHarnessOptions {
  /** The patch entries, from the strict parser. */
  files: readonly PatchedFile[];
  rules: ProtectionRules;
  allowTestChanges: boolean;
  signal?: AbortSignal | undefined;
}

export interface BaseHarnessOutcome {
  /** `git apply`'s result; nothing below happened when it failed. */
  applied: ExecResult;
  /** Files whose harness part the patch changed, with what changed (`package.json: scripts.test`). */
  harnessChanges: Map<string, string[]>;
  /** Paths put back to the base before the tests ran, sorted. */
  restored: string[];
}

/** The paths git will write for this patch (new names; the parser supplies rename sources). */
async function gitTouchedPaths(
  sandbox: Sandbox,
  patchFile: string,
  signal: AbortSignal | undefined,
): Promise<string[]> {
  const listed = await sandbox.exec(
    `git apply --numstat -z --binary ${quoteShellArg(patchFile)} 2>/dev/null`,
    { signal },
  );
  if (listed.exitCode !== 0) return [];
  // "<added>\t<deleted>\t<path>\0" per file.
  return listed.stdout
    .split("\0")
    .map((entry) => /^(?:\d+|-)\t(?:\d+|-)\t(.+)$/s.exec(entry)?.[1])
    .filter((name): name is string => name !== undefined);
}

/** A file's text; undefined when absent. One that cannot be read (too large, a directory) is
 * text no parser accepts, so the content check counts it as changed. */
async function readText(
  sandbox: Sandbox,
  file: string,
  signal: AbortSignal | undefined,
): Promise<string | undefined> {
  if ((await sandbox.files.stat(file, { signal })) === undefined) return undefined;
  try {
    const bytes = await sandbox.files.readFile(file, { signal, maxBytes: contentLimitBytes });
    return Buffer.from(bytes).toString("utf8");
  } catch {
    return unreadable;
  }
}

const unreadable = "\0 unreadable";

/**
 * Applies the patch in `sandbox` (already written to `patchFile`) and restores the base harness.
 * Never runs anything the patch brought: only git, cp and rm, before any test.
 */
export async function applyWithBaseHarness(
  sandbox: Sandbox,
  patchFile: string,
  apply: () => Promise<ExecResult>,
  options: BaseHarnessOptions,
): Promise<BaseHarnessOutcome> {
  const { files, rules, allowTestChanges, signal } = options;
  const byPath = new Map<string, PatchedFile>();
  for (const file of files) {
    byPath.set(file.path, file);
    if (file.from !== undefined) byPath.set(file.from, { ...file, path: file.from });
  }
  // A path only git names is judged as a new file: the stricter reading.
  for (const name of await gitTouchedPaths(sandbox, patchFile, signal)) {
    if (!byPath.has(name)) byPath.set(name, { path: name, change: "added", binary: false });
  }

  const mustRestore = new Set<string>();
  for (const [name, file] of byPath) {
    const kind = protectedKindOf(name, file, rules);
    if (kind === undefined) continue;
    if (!(allowTestChanges && acceptedWithTestChanges.has(kind))) mustRestore.add(name);
  }
  const contentFiles = [...byPath.keys()].filter(hasHarnessContent);
  const baseText = new Map<string, string | undefined>();
  for (const name of contentFiles) baseText.set(name, await readText(sandbox, name, signal));

  const stash = `/tmp/.cordon-base-${randomUUID()}`;
  const stashed = [...new Set([...mustRestore, ...contentFiles])].sort();
  await saveBase(sandbox, stash, stashed, signal);

  const applied = await apply();
  const harnessChanges = new Map<string, string[]>();
  if (applied.exitCode !== 0) {
    await restoreBase(sandbox, stash, [], signal);
    return { applied, harnessChanges, restored: [] };
  }

  for (const name of contentFiles) {
    const patched = await readText(sandbox, name, signal);
    const changes = harnessContentChanges(name, baseText.get(name), patched);
    if (changes.length > 0) {
      harnessChanges.set(name, changes);
      mustRestore.add(name);
    }
  }
  const restored = [...mustRestore].sort();
  await restoreBase(
    sandbox,
    stash,
    restored.map((name) => [name, stashed.indexOf(name)]),
    signal,
  );
  return { applied, harnessChanges, restored };
}

/** Copies each path that exists (file, symlink, mode and all) to `<stash>/<index>`. */
async function saveBase(
  sandbox: Sandbox,
  stash: string,
  paths: readonly string[],
  signal: AbortSignal | undefined,
): Promise<void> {
  const lines = [`mkdir -p ${quoteShellArg(stash)}`];
  paths.forEach((name, index) => {
    const from = quoteShellArg(`./${name}`);
    lines.push(
      `if [ -e ${from} ] || [ -L ${from} ]; then cp -a -- ${from} ${quoteShellArg(`${stash}/${index}`)}; fi`,
    );
  });
  await runScript(sandbox, lines, "save the base harness", signal);
}

/** Puts each path back from the stash, or removes it when the base had none; drops the stash. */
async function restoreBase(
  sandbox: Sandbox,
  stash: string,
  paths: readonly (readonly [string, number])[],
  signal: AbortSignal | undefined,
): Promise<void> {
  const lines = paths.map(([name, index]) => {
    const target = quoteShellArg(`./${name}`);
    const saved = quoteShellArg(`${stash}/${index}`);
    return `rm -rf -- ${target}; if [ -e ${saved} ] || [ -L ${saved} ]; then mkdir -p -- "$(dirname -- ${target})" && cp -a -- ${saved} ${target}; fi`;
  });
  lines.push(`rm -rf -- ${quoteShellArg(stash)}`);
  await runScript(sandbox, lines, "restore the base harness", signal);
}

async function runScript(
  sandbox: Sandbox,
  lines: readonly string[],
  what: string,
  signal: AbortSignal | undefined,
): Promise<void> {
  const result = await sandbox.exec(`set -e\n${lines.join("\n")}\n`, { signal });
  if (result.exitCode !== 0) {
    throw new SandboxError(
      `could not ${what} in the verify sandbox: ${(result.stdout + result.stderr).trim()}`,
      { fix: "run again with --keep-sandboxes and look at the verify sandbox's /workspace" },
    );
  }
}
