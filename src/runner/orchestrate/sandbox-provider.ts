import type { EgressDecision, SandboxLease, TreePair } from "../../sandbox/index.js";
import type { RunPlan } from "../../policy/index.js";

/** What acquiring a sandbox reports while it works (image build, seeding, container start). */
export interface SandboxProgress {
  phase: string;
  message: string;
}

export interface ProvideSandboxOptions {
  signal?: AbortSignal | undefined;
  onProgress?: ((progress: SandboxProgress) => void) | undefined;
  /** Each request the sandbox's egress proxy admits or refuses while it is held. */
  onEgress?: ((decision: EgressDecision) => void) | undefined;
  /**
   * The caller will read the private copy's changes (`changes`): a backend that reads them with
   * a container of its own may start it alongside the acquire.
   */
  readsChanges?: boolean | undefined;
}

/**
 * Maps a plan to the sandbox its tools run in: a container by scope key when the plan is
 * sandboxed, the host confined to the workspace when it is not. Injected, so embedders can bring
 * their own backend and unit tests an in-memory one.
 */
export interface SandboxProvider {
  acquire(plan: RunPlan, options: ProvideSandboxOptions): Promise<SandboxLease>;
  /**
   * Makes the sandbox of `target` a fork of the sandbox of `source` and acquires it: its private
   * copy starts as `source`'s is now, its diff is still against `source`'s baseline, and it has a
   * container of its own (`DockerSandboxManager.fork`). `target`'s sandbox must not exist yet.
   * Optional: a backend without private copies cannot fork.
   */
  fork?(source: RunPlan, target: RunPlan, options: ProvideSandboxOptions): Promise<SandboxLease>;
  /**
   * Removes the plan's sandbox and its private workspace, for one-off work (fix-tests) that
   * should leave nothing behind. Optional: a backend without persistent sandboxes has nothing to do.
   * `keepWorkspace`: only the container goes (a setup phase ends so), the private workspace stays.
   */
  discard?(plan: RunPlan, options?: { keepWorkspace?: boolean }): Promise<void>;
  /**
   * Stops the plan's sandbox (its processes end; its private workspace stays and the next acquire
   * starts it again). False when it was not running. Optional: a backend with nothing that keeps
   * running has nothing to stop.
   */
  stop?(plan: RunPlan): Promise<boolean>;
  /**
   * The command lines running in the plan's sandbox now, from any process (`cordon exec -it` in
   * another terminal, a server the agent left running): a stop would end them. Optional: a backend
   * that cannot tell says nothing, and a stop goes ahead.
   */
  commandsIn?(plan: RunPlan): Promise<string[]>;
  /**
   * For each pair of checkpoint trees of the plan's copy, how many paths differ (`from`
   * undefined: the baseline), without acquiring its sandbox (`WorkspaceCheckpoints.compare`)
   * or building its image (a missing one is an error). Optional: a backend without private
   * copies has no checkpoints to count.
   */
  compareCheckpoints?(
    plan: RunPlan,
    pairs: readonly TreePair[],
    options?: { signal?: AbortSignal | undefined },
  ): Promise<(number | undefined)[]>;
  /**
   * Resolves when work the backend started in the background has finished (the warm pool's
   * refill after a take, an automatic prune); a runner's `close()` waits for it, so nothing it
   * set going is still changing the engine afterwards. Optional: a backend with none.
   */
  settle?(): Promise<void>;
}
