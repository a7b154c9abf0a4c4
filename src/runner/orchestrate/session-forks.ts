import { ConfigError } from "../../common/index.js";
import type { RunPlan } from "../../policy/index.js";
import type { SandboxLease } from "../../sandbox/index.js";
import type { PlanRequest } from "../create-runner.js";
import type { ProvideSandboxOptions, SandboxProvider } from "./sandbox-provider.js";
import { seededCopyOf } from "./session-checkpoints.js";

/**
 * Forks of a session's sandbox (`Runner.forkSandbox`, `cordon fork`): new sessions whose private
 * copies start as the parent's is now. The plan says which copies, the sandbox backend makes the
 * fork (`SandboxProvider.fork`: a throwaway container copies the files, the parent frozen).
 */

/**
 * A fork's session name: letters, digits, `.`, `_`, `-`, starting with a letter or digit, at most
 * 64 characters — as a checkpoint's, so no path (`../x`), option (`--x`), space or ref can be one.
 */
const forkNamePattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Throws a usage error (exit 2) unless `name` can name a fork's session. */
export function assertForkName(name: string): void {
  if (forkNamePattern.test(name) && !name.includes("..")) return;
  throw new ConfigError(
    `${JSON.stringify(name)} cannot name a fork: use letters, digits, ".", "_" and "-", starting with a letter or digit (at most 64)`,
    { fix: "choose a name such as try-2 or fix-parser-b" },
  );
}

/** What a fork is made from: the parent session's request, the fork's session name. */
export type ForkSandboxRequest = PlanRequest & {
  /** The new session's name (see `assertForkName`); it must have no sandbox yet. */
  as: string;
  signal?: AbortSignal | undefined;
  onProgress?: ProvideSandboxOptions["onProgress"];
  readsChanges?: ProvideSandboxOptions["readsChanges"];
};

/**
 * Forks the sandbox of `request`'s session into session `request.as` and holds the fork: its
 * plan (the parent's request with the fork's session) and lease. The parent's copy must exist
 * (a usage error otherwise); a run may be using it. No session lock is taken here.
 */
export async function forkSessionSandbox(
  runner: { plan: (request: PlanRequest) => Promise<RunPlan>; sandboxes: SandboxProvider },
  request: ForkSandboxRequest,
): Promise<{ plan: RunPlan; lease: SandboxLease }> {
  assertForkName(request.as);
  const { as, signal, onProgress, readsChanges, ...parentRequest } = request;
  const source = await runner.plan(parentRequest);
  await seededCopyOf(source);
  const target = await runner.plan({ ...parentRequest, sessionKey: as });
  if (!runner.sandboxes.fork) {
    throw new ConfigError("this sandbox backend cannot fork a sandbox", {
      fix: "use the Docker sandbox backend (the default)",
    });
  }
  const lease = await runner.sandboxes.fork(source, target, { signal, onProgress, readsChanges });
  for (const warning of lease.warnings ?? []) {
    onProgress?.({ phase: "warning", message: `warning: ${warning}` });
  }
  return { plan: target, lease };
}
