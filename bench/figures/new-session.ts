import type { BenchContext } from "../context.js";
import type { AcquireOptions, SandboxSpec } from "../../src/sandbox/index.js";
import { execOk } from "./failures.js";

/**
 * cordon's side of a new-session figure: acquire `spec` (a session that does not exist yet) and
 * run `exec true` in it. Returns the cleanup (removing the sandbox), which the caller runs after
 * the clock stopped; on a failure the sandbox is removed at once and the error rethrown.
 */
export async function newSessionAndExec(
  ctx: BenchContext,
  spec: SandboxSpec,
  options: Pick<AcquireOptions, "pool"> = {},
): Promise<() => Promise<void>> {
  const cleanup = async (): Promise<void> => {
    await ctx.inventory.remove(spec.containerName).catch(() => undefined);
  };
  try {
    const lease = await ctx.manager.acquire(spec, { ...options, signal: ctx.signal });
    await execOk(lease.sandbox, "true", ctx.signal).finally(() => lease.release());
  } catch (error) {
    await cleanup();
    throw error;
  }
  return cleanup;
}
