import type { ContainerClient } from "./client/index.js";
import { executorContainerPath } from "./resident/executor-binary.js";

/**
 * Whether commands run in a sandbox container (from any process): an idle sandbox runs only its
 * init, `sleep infinity` and cordon's resident executor (which lives as long as the container).
 * When the engine cannot tell, it counts as busy: never destroy on doubt.
 */
export async function isBusy(client: ContainerClient, nameOrId: string): Promise<boolean> {
  try {
    const working = (await client.processes(nameOrId)).filter(
      (command) => !command.startsWith(executorContainerPath),
    );
    return working.length > 2;
  } catch {
    return true;
  }
}
