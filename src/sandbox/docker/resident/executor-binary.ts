import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";

import { packageRoot } from "../../../common/index.js";
import type { SupportVolumes } from "../support-volumes.js";

import { executorContainerPath } from "./resident-connection.js";

export { executorContainerPath };

/** Where the executor's support volume is mounted; the binary is `executor` in it. */
export const executorContainerDirectory = path.posix.dirname(executorContainerPath);
/** The binary's name in its volume. */
export const executorFileName = path.posix.basename(executorContainerPath);
/**
 * Where a turn's checkpoint recorder (inspector/recorder.c, built beside the executor) is, in the
 * same volume: recording inspectors mount it and run it (checkpoint-copy.sh `ahead`).
 */
export const recorderContainerPath = path.posix.join(executorContainerDirectory, "recorder");

/**
 * The host path of the executor binary, built from executor.c by scripts/build-executor.sh (run by
 * `npm run build` and scripts/setup.sh); undefined when it was not built (no C compiler), and then
 * containers are created without it and every call goes by plain exec.
 */
export function residentExecutorBinary(): string | undefined {
  const binary = path.join(packageRoot(), "dist", "executor", "cordon-executor");
  return existsSync(binary) ? binary : undefined;
}

/**
 * The engine's volume holding the executor `binary` (`residentExecutorBinary()`) and the recorder
 * built beside it (`cordon-recorder`, when there is one), made there on first use (so it travels
 * with the engine, local or elsewhere); undefined when none was built.
 */
export async function ensureExecutorVolume(
  support: SupportVolumes,
  image: string,
  binary: string | undefined,
): Promise<string | undefined> {
  if (binary === undefined) return undefined;
  const files = [{ name: executorFileName, content: await readFile(binary), mode: 0o755 }];
  const recorder = path.join(path.dirname(binary), "cordon-recorder");
  if (existsSync(recorder)) {
    const name = path.posix.basename(recorderContainerPath);
    files.push({ name, content: await readFile(recorder), mode: 0o755 });
  }
  return (await support.ensure("executor", files, image)).name;
}
