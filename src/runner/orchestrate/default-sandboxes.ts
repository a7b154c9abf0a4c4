import path from "node:path";

import { ConfigError, type Logger } from "../../common/index.js";
import {
  DockerSandbox,
  DockerSandboxManager,
  HostSandbox,
  SandboxInventory,
  commandsRunning,
  stopSandbox,
  type DockerEngine,
  type SandboxLease,
  type UpstreamProxy,
} from "../../sandbox/index.js";
import { sandboxesHeld } from "../session/index.js";
import type { RunPlan } from "../../policy/index.js";
import type { ProvideSandboxOptions, SandboxProvider } from "./sandbox-provider.js";

export interface DefaultSandboxesOptions {
  engine: DockerEngine;
  /** cordon's state directory: private workspaces and sandbox records live under it. */
  stateDir: string;
  logger?: Logger | undefined;
  /** The host's own proxy, which egress proxies go through. */
  upstreamProxy?: UpstreamProxy | undefined;
  /** The base of the built-in sandbox image (`CORDON_BASE_IMAGE`); default the official one. */
  baseImage?: string | undefined;
}

/**
 * The sandboxes cordon uses by default: a Docker container by scope key when the plan is
 * sandboxed, the host confined to the agent workspace when it is not. The manager is created once,
 * so concurrent runs in one process share its per-key locks.
 */
export function defaultSandboxes(options: DefaultSandboxesOptions): SandboxProvider {
  const manager = new DockerSandboxManager({
    engine: options.engine,
    stateDirectory: options.stateDir,
    logger: options.logger,
    upstreamProxy: options.upstreamProxy,
    imageOptions: { baseImage: options.baseImage },
    // Session locks and forward records say which sandboxes live runs and port forwards of any
    // process hold: never stopped or pruned.
    holders: async () => {
      const held = await sandboxesHeld(options.stateDir);
      return (sandbox) => held.holderOf(sandbox);
    },
    createSandbox: (container) => DockerSandbox.attach(options.engine, container, options.logger),
  });
  const inventory = new SandboxInventory({
    engine: options.engine,
    stateDirectory: options.stateDir,
    logger: options.logger,
    imageOptions: { baseImage: options.baseImage },
  });
  const acquire = async (
    plan: RunPlan,
    acquireOptions: ProvideSandboxOptions,
  ): Promise<SandboxLease> => {
    const spec = plan.sandbox.spec;
    if (!plan.sandbox.enabled || !spec) {
      const sandbox = await HostSandbox.create({
        root: plan.agent.workspace,
        // Logs and background processes of host runs live with cordon's state, per agent.
        stateDirectory: path.join(options.stateDir, "host", plan.agent.id),
        logger: options.logger,
      });
      return { sandbox, fresh: false, release: () => Promise.resolve() };
    }
    // Acquiring is also when stale sandboxes of this state directory are pruned (in the background).
    return manager.acquire(spec, {
      ...acquireOptions,
      prune: plan.sandbox.prune,
      pool: plan.sandbox.pool,
    });
  };
  return {
    acquire,
    async fork(source, target, forkOptions) {
      const from = source.sandbox.spec;
      const to = target.sandbox.spec;
      if (!source.sandbox.enabled || !from || !target.sandbox.enabled || !to) {
        throw new ConfigError(
          `session ${source.sessionKey} is not sandboxed, so it has no private copy to fork`,
          { fix: 'forks are of seeded private copies: sandbox.mode on, workspaceAccess "none"' },
        );
      }
      return manager.fork(from, to, {
        ...forkOptions,
        prune: target.sandbox.prune,
        pool: target.sandbox.pool,
      });
    },
    async discard(plan, discardOptions = {}) {
      const spec = plan.sandbox.spec;
      const name = spec?.containerName;
      if (!name) return;
      if (!(await inventory.exists(name))) {
        // Nothing to discard is done, like a 404 on remove (fix-tests discards what may never
        // have started) — but an acquire stopped midway may have seeded the copy already, or
        // found an older run's copy, whose work it keeps (UnappliedChangesError).
        if (spec.privateWorkspace && !discardOptions.keepWorkspace) {
          await inventory.discardOrphan(spec.privateWorkspace, {
            project: spec.agentWorkspace,
            sessionKey: spec.sessionKey,
            agent: spec.agentId,
          });
        }
        return;
      }
      // Discarding is asked for by name (--rm, fix-tests' own sandboxes, createSandbox's
      // `remove`): the copy's changes go with it, unlike a prune or a plain `sandbox rm`.
      await inventory.remove(name, { ...discardOptions, discardChanges: true });
    },
    async commandsIn(plan) {
      const name = plan.sandbox.spec?.containerName;
      if (!plan.sandbox.enabled || !name) return [];
      // Undefined (the engine cannot tell) reads as busy, as for the idle stop: never end on doubt.
      return (
        (await commandsRunning(options.engine.containers, name)) ?? [
          "(unknown: the engine cannot list its processes)",
        ]
      );
    },
    async compareCheckpoints(plan, pairs, compareOptions) {
      const spec = plan.sandbox.spec;
      if (!plan.sandbox.enabled || !spec) return pairs.map(() => undefined);
      return manager.compareCheckpoints(spec, pairs, compareOptions);
    },
    settle: () => manager.flush(),
    async stop(plan) {
      const name = plan.sandbox.spec?.containerName;
      if (!plan.sandbox.enabled || !name) return false;
      return stopSandbox({
        engine: options.engine,
        stateDirectory: options.stateDir,
        name,
        logger: options.logger,
      });
    },
  };
}
