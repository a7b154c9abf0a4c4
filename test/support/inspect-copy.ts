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
export async function copyChanges(copy: string): Promise<WorkspaceChanges> {
  const owner = await stat(copy);
  return dockerWorkspaceChanges({
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
}

/** The copy's changes as one patch (see `copyChanges`). */
export async function patchOf(
  copy: string,
  options: { exclude?: readonly string[]; timeoutMs?: number } = {},
): Promise<Buffer> {
  return Buffer.from(await (await copyChanges(copy)).patch(options));
}
