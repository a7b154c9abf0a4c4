/**
 * What the test command writes, however often it runs: fix-tests leaves it out of the agent's
 * patch (a build tree, caches, test binaries are the command's, not the agent's, and never
 * "tests"). Learned on the work copy before the agent starts, so nothing the agent does can add to
 * it: leaving a path out only makes the patch verified on a clean copy smaller.
 *
 * The rule needs no list of tools. Three parts:
 * 1. every file the run before the agent wrote;
 * 2. every directory it created (one the seeded copy did not have): all of it, whatever is
 *    written there later — CMake writes `CMakeFiles/<target>/compiler_depend.internal` only on a
 *    rebuild, and a fixed build writes objects a failed one never reached;
 * 3. when that run wrote files outside the directories it created (an in-source build, make's
 *    objects beside the sources), what a second run writes too: a rebuild writes what a build
 *    does not.
 */
import {
  takeBaselineDirectories,
  takeChangedFiles,
  type ChangesSource,
} from "../../changes/index.js";

/**
 * Which files a command wrote in a seeded copy: the changed-file lists (path → what it is now)
 * taken before and after it, compared. Whatever changed before (a setup step) and was left alone
 * by the command is not its output.
 */
export function filesWrittenBetween(
  before: ReadonlyMap<string, string>,
  after: ReadonlyMap<string, string>,
): string[] {
  const paths = new Set([...before.keys(), ...after.keys()]);
  return [...paths].filter((file) => before.get(file) !== after.get(file)).sort();
}

/** A command's run, with the copy's changed files around it. */
export interface WatchedRun<T> {
  result: T;
  before: ReadonlyMap<string, string>;
  after: ReadonlyMap<string, string>;
  /** The files the run wrote (filesWrittenBetween). */
  written: string[];
}

/** Runs `run` in the sandbox of `source` and says which files it wrote. */
export async function watchFilesWritten<T>(
  source: ChangesSource,
  run: () => Promise<T>,
  signal: AbortSignal | undefined,
): Promise<WatchedRun<T>> {
  const before = await takeChangedFiles(source, { signal });
  const result = await run();
  const after = await takeChangedFiles(source, { signal });
  return { result, before, after, written: filesWrittenBetween(before, after) };
}

export interface CreatedDirectoriesInput {
  /** The copy's changed files before the run. */
  before: ReadonlyMap<string, string>;
  /** After it. */
  after: ReadonlyMap<string, string>;
  /** The seeded copy's directories (`WorkspaceChanges.baselineDirectories`). */
  baselineDirectories: ReadonlySet<string>;
}

/**
 * The directories a run created, outermost only: those holding a file after it that held none
 * before it (no file at seeding, none written by a step before the run). An empty directory the
 * copy had reads as created; whatever is written there is the command's anyway.
 */
export function createdDirectories(input: CreatedDirectoriesInput): string[] {
  const existed = new Set(input.baselineDirectories);
  for (const [file, now] of input.before) {
    if (now !== "deleted") for (const directory of ancestors(file)) existed.add(directory);
  }
  const created = new Set<string>();
  for (const file of filesWrittenBetween(input.before, input.after)) {
    if (input.after.get(file) === "deleted") continue;
    const outermost = ancestors(file).find((directory) => !existed.has(directory));
    if (outermost !== undefined) created.add(outermost);
  }
  return [...created].sort();
}

/**
 * The test command's outputs as fix-tests lists them and excludes them from the patch: created
 * directories as `dir/` (everything under it), then the files written outside them.
 */
export function testOutputs(written: readonly string[], directories: readonly string[]): string[] {
  const inside = (file: string): boolean =>
    directories.some((directory) => file.startsWith(`${directory}/`));
  const outermost = directories.filter((directory) => !inside(directory));
  const outside = written.filter((file) => !inside(file));
  return [...new Set([...outermost.map((directory) => `${directory}/`), ...outside])].sort();
}

/** Whether outputs name files outside created directories: a second run may write more there. */
export function needsSecondRun(outputs: readonly string[]): boolean {
  return outputs.some((output) => !output.endsWith("/"));
}

export interface LearnTestOutputsOptions {
  source: ChangesSource;
  /** The run before the agent, watched. */
  first: WatchedRun<unknown>;
  /** Runs the test command once more in the same sandbox. */
  rerun: () => Promise<unknown>;
  /** Called before the second run, for progress. */
  onRerun?: (() => void) | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * Everything the test command writes (see the module comment), from its first run and, when
 * that is not enough, a second. Costs nothing when the first run wrote nothing; one reading of
 * the baseline's directories when it wrote only inside directories it created.
 */
export async function learnTestOutputs(
  options: LearnTestOutputsOptions,
): Promise<{ outputs: string[]; ranTwice: boolean }> {
  const { first, source, signal } = options;
  if (first.written.length === 0) return { outputs: [], ranTwice: false };
  const baselineDirectories = await takeBaselineDirectories(source, { signal });
  const outputsOf = (run: WatchedRun<unknown>): string[] =>
    testOutputs(run.written, createdDirectories({ ...run, baselineDirectories }));
  const outputs = outputsOf(first);
  if (!needsSecondRun(outputs)) return { outputs, ranTwice: false };
  options.onRerun?.();
  // The first run's after-state is the second's before-state: nothing ran in between.
  const result = await options.rerun();
  const after = await takeChangedFiles(source, { signal });
  const second = outputsOf({
    result,
    before: first.after,
    after,
    written: filesWrittenBetween(first.after, after),
  });
  const directories = [...outputs, ...second]
    .filter((output) => output.endsWith("/"))
    .map((output) => output.slice(0, -1));
  const files = [...outputs, ...second].filter((output) => !output.endsWith("/"));
  return { outputs: testOutputs(files, directories), ranTwice: true };
}

/** `a/b/c.o` → `a`, `a/b` (outermost first); none for a top-level file. */
function ancestors(file: string): string[] {
  const parts = file.split("/");
  return parts.slice(0, -1).map((_, at) => parts.slice(0, at + 1).join("/"));
}
