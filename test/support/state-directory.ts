import { rm } from "node:fs/promises";

import { releaseWorkspaceDisksBelow } from "../../src/sandbox/index.js";

/**
 * Deletes a test's state directory (CORDON_HOME): first unmounts the disk images of its private
 * workspaces (`sandbox.disk`), which `rm -r` alone would empty and then fail on, leaving loop
 * mounts behind on the host.
 */
export async function removeStateDirectory(directory: string): Promise<void> {
  await releaseWorkspaceDisksBelow(directory);
  await rm(directory, { recursive: true, force: true });
}
