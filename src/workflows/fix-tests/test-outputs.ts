import { takeChangedFiles, type ChangesSource } from "../../changes/index.js";

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

/**
 * Runs the test command (`run`) in the work sandbox and says which files it wrote: build outputs,
 * caches, test binaries. fix-tests leaves those out of the agent's patch — they are the test
 * command's, not the agent's — and since they are known before the agent starts, nothing the agent
 * does can add to the list: leaving a file out only makes the patch verified on a clean copy smaller.
 */
export async function watchFilesWritten<T>(
  source: ChangesSource,
  run: () => Promise<T>,
  signal: AbortSignal | undefined,
): Promise<{ result: T; written: string[] }> {
  const before = await takeChangedFiles(source, { signal });
  const result = await run();
  const after = await takeChangedFiles(source, { signal });
  return { result, written: filesWrittenBetween(before, after) };
}
