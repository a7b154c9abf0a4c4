import { SandboxError } from "../../common/index.js";
import type { ContainerClient, ContainerDetails } from "./client/index.js";

/**
 * Runs `fn` with every process of a container paused (the cgroup freezer), so what `fn` reads of
 * its workspace is one state; a missing or stopped container runs nothing and is read as it is.
 * The one place a sandbox is frozen for a reading (the manager's lease, prune's check for
 * unapplied work).
 */
export async function whileFrozen<T>(
  containers: ContainerClient,
  info: ContainerDetails | undefined,
  fn: () => Promise<T>,
): Promise<T> {
  if (!info?.state.running) return fn();
  if (info.state.paused) {
    // Acquire resumes a pause left behind, so this is another command freezing it right now.
    throw new SandboxError(`${info.name} is paused by another cordon command taking its changes`, {
      fix: "run the command again when that one has finished",
    });
  }
  await containers.pause(info.id);
  try {
    const result = await fn();
    const after = await containers.inspect(info.id);
    if (!after?.state.paused) {
      throw new SandboxError(
        `${info.name} was resumed while cordon read its workspace (by another cordon command or docker unpause), so what was read may be torn`,
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
}
