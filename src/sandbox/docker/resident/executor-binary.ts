import { existsSync } from "node:fs";
import path from "node:path";

import { packageRoot } from "../../../common/index.js";

export { executorContainerPath } from "./resident-connection.js";

/**
 * The host path of the executor binary, built from executor.c by scripts/build-executor.sh (run by
 * `npm run build` and scripts/setup.sh); undefined when it was not built (no C compiler), and then
 * containers are created without it and every call goes by plain exec.
 */
export function residentExecutorBinary(): string | undefined {
  const binary = path.join(packageRoot(), "dist", "executor", "cordon-executor");
  return existsSync(binary) ? binary : undefined;
}
