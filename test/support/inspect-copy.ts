import { stat } from "node:fs/promises";

import {
  DockerEngine,
  WorkspaceInspectors,
  baselineGitDir,
  dockerWorkspaceChanges,
  type WorkspaceChanges,
} from "../../src/sandbox/index.js";
import { requireSandboxImage } from "./docker.js";

/**
 * The changes of a seeded copy on the host, read as cordon reads them: by a real throwaway
 * inspector container of the sandbox image, as the copy's owner. No sandbox runs over the copy in
 * these tests, so nothing needs freezing.
 */
async function withCopyChanges<T>(
  copy: string,
  read: (changes: WorkspaceChanges) => Promise<T>,
): Promise<T> {
  const owner = await stat(copy);
  const changes = dockerWorkspaceChanges({
    inspectors: new WorkspaceInspectors({ containers: new DockerEngine().containers }),
    target: {
      sandboxName: "cordon-test-inspect",
      workspace: copy,
      baselineGitDir: baselineGitDir(copy),
      image: await requireSandboxImage(),
      user: `${owner.uid}:${owner.gid}`,
    },
    freeze: (fn) => fn(),
  });
  try {
    return await read(changes);
  } finally {
    await changes.dispose();
  }
}

/** The copy's changes as one patch (see `withCopyChanges`). */
export function patchOf(
  copy: string,
  options: { exclude?: readonly string[]; timeoutMs?: number } = {},
): Promise<Buffer> {
  return withCopyChanges(copy, async (changes) => Buffer.from(await changes.patch(options)));
}

/** The copy's changed files (see `withCopyChanges`). */
export function changedFilesOf(copy: string): Promise<Map<string, string>> {
  return withCopyChanges(copy, (changes) => changes.changedFiles());
}

/** The seeded copy's directories, from its baseline (see `withCopyChanges`). */
export function baselineDirectoriesOf(copy: string): Promise<Set<string>> {
  return withCopyChanges(copy, (changes) => changes.baselineDirectories());
}
