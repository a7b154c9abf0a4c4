import type { ContainerClient } from "./client/index.js";
import { executorContainerPath } from "./resident/executor-binary.js";

/**
 * The command lines running in a sandbox container besides its own (its init, `sleep infinity`
 * and cordon's resident executor, which live as long as the container), oldest first — what
 * commands of any process are doing there. Undefined when the engine cannot tell.
 */
export async function commandsRunning(
  client: ContainerClient,
  nameOrId: string,
): Promise<string[] | undefined> {
  try {
    const commands = await client.processes(nameOrId);
    return commands.filter((command) => !command.startsWith(executorContainerPath)).slice(2);
  } catch {
    return undefined;
  }
}

/**
 * Whether commands run in a sandbox container (from any process). When the engine cannot tell,
 * it counts as busy: never destroy on doubt.
 */
export async function isBusy(client: ContainerClient, nameOrId: string): Promise<boolean> {
  const commands = await commandsRunning(client, nameOrId);
  return commands === undefined || commands.length > 0;
}
