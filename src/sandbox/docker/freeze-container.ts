import { SandboxError } from "../../common/index.js";
import type { ContainerClient, ContainerDetails } from "./client/index.js";
import { holdFreezeMarker, type FreezeWaitOptions } from "./freeze-marker.js";

/**
 * Runs `fn` with every process of a container paused (the cgroup freezer), so what `fn` reads of
 * its workspace is one state; a missing or stopped container runs nothing and is read as it is.
 * The one place a sandbox is frozen for a reading (the manager's lease, prune's check for
 * unapplied work). The freeze is announced by its marker (freeze-marker.ts) from before the pause
 * to after the resume: another command freezing it waits its turn, and an acquire (another
 * session's run) waits rather than resume it (settle-container.ts).
 */
export async function whileFrozen<T>(
  containers: ContainerClient,
  info: ContainerDetails | undefined,
  fn: () => Promise<T>,
  /** Where its marker lives, and its container name (the sandbox's, not a pool member's). */
  marker: { stateDirectory: string; containerName: string } & FreezeWaitOptions,
): Promise<T> {
  if (!info?.state.running) return fn();
  return holdFreezeMarker(
    marker.stateDirectory,
    marker.containerName,
    async () => {
      // Looked at again: the wait for another holder may have been long.
      const now = await containers.inspect(info.id);
      if (!now?.state.running) return fn();
      // Paused with the marker ours: no live cordon command froze it (a dead one's freeze, or a
      // `docker pause`), so this freeze takes it over and resumes it after.
      if (!now.state.paused) await containers.pause(info.id);
      try {
        const result = await fn();
        const after = await containers.inspect(info.id);
        if (!after?.state.paused) {
          throw new SandboxError(
            `${info.name} was resumed while cordon read its workspace (by docker unpause, or a cordon older than its freeze marker), so what was read may be torn`,
            { fix: "run the command again" },
          );
        }
        return result;
      } finally {
        await containers.unpause(info.id).catch(async (error: unknown) => {
          // Already resumed (or gone) is fine; a container left frozen is not.
          if ((await containers.inspect(info.id))?.state.paused) throw error;
        });
      }
    },
    marker,
  );
}
