import type { RunPlan } from "../policy/index.js";
import type { Sandbox, SandboxLease } from "../sandbox/index.js";
import {
  createRunner,
  type PlanRequest,
  type Runner,
  type RunnerOptions,
} from "./create-runner.js";
import type { ProvideSandboxOptions } from "./orchestrate/index.js";

export interface CreateSandboxOptions
  extends
    Omit<RunnerOptions, "model" | "modelScript" | "tools" | "maxConcurrentRuns">,
    Pick<PlanRequest, "agentId" | "sessionKey"> {
  /**
   * Remove the sandbox — container and private workspace — when it is released, as `cordon run
   * --rm` does. Default false: the container stays for the next acquire of the same scope key.
   */
  remove?: boolean | undefined;
  signal?: AbortSignal | undefined;
  onProgress?: ProvideSandboxOptions["onProgress"];
}

/** A sandbox held without the agent loop; `await using` releases it. */
export interface CordonSandbox extends AsyncDisposable {
  /** Commands, background processes and files, exactly as the agent's tools reach them. */
  readonly sandbox: Sandbox;
  /** The plan it was acquired by: what `cordon sandbox explain` prints for the same request. */
  readonly plan: RunPlan;
  /** Things the user should know (e.g. a stale container kept because it is busy). */
  readonly warnings: readonly string[];
  /** Host path of its private workspace (a seeded copy), if it has one: what `cordon diff` reads. */
  readonly privateWorkspace: string | undefined;
  /**
   * A new sandbox, for the session `as`, whose private copy starts as this one's is now (read
   * with this one frozen, by a throwaway container); its diff is still against the same baseline
   * and it has a container of its own (`Runner.forkSandbox`). Held like this one; `remove`
   * removes the fork when it is released. `as` must have no sandbox yet (exit 2).
   */
  fork(options: {
    as: string;
    remove?: boolean | undefined;
    signal?: AbortSignal | undefined;
    onProgress?: ProvideSandboxOptions["onProgress"];
  }): Promise<CordonSandbox>;
  /** Lets the sandbox go (and removes it with `remove`); later calls do nothing. */
  release(): Promise<void>;
}

/**
 * The sandbox a run with these options would get — config, policy plan, container by scope key,
 * seeded workspace — for embedders who run their own commands and need no model. It does not take
 * the session's lock that `runner.run` takes: do not run an agent on the same session meanwhile.
 */
export async function createSandbox(options: CreateSandboxOptions = {}): Promise<CordonSandbox> {
  const { agentId, sessionKey, remove, signal, onProgress, ...runnerOptions } = options;
  const runner = createRunner(runnerOptions);
  const request = { agentId, sessionKey };
  const held = await runner.acquireSandbox({ ...request, signal, onProgress });
  return heldSandbox(runner, request, held, remove === true);
}

function heldSandbox(
  runner: Runner,
  request: Pick<PlanRequest, "agentId" | "sessionKey">,
  { plan, lease }: { plan: RunPlan; lease: SandboxLease },
  remove: boolean,
): CordonSandbox {
  let released: Promise<void> | undefined;
  const release = (): Promise<void> =>
    (released ??= (async () => {
      await lease.release();
      if (remove) await runner.discardSandbox(request);
    })());
  return {
    sandbox: lease.sandbox,
    plan,
    warnings: lease.warnings ?? [],
    privateWorkspace: lease.privateWorkspace,
    fork: async ({ as, remove: removeFork, signal, onProgress }) => {
      const forked = await runner.forkSandbox({ ...request, as, signal, onProgress });
      return heldSandbox(
        runner,
        { agentId: request.agentId, sessionKey: as },
        forked,
        removeFork === true,
      );
    },
    release,
    [Symbol.asyncDispose]: release,
  };
}
