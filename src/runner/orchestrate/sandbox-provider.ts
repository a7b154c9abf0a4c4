import type { Duplex } from "node:stream";

import type { EgressDecision, Sandbox, WorkspaceChanges } from "../../sandbox/index.js";
import type { RunPlan } from "../../policy/index.js";

/** What acquiring a sandbox reports while it works (image build, seeding, container start). */
export interface SandboxProgress {
  phase: string;
  message: string;
}

/** A sandbox held for one run; `release` hands it back (the container stays for reuse). */
export interface ProvidedSandbox {
  sandbox: Sandbox;
  /** True when the sandbox was created for this run (a new container or workspace). */
  fresh: boolean;
  /** Things the user should know (e.g. a stale container kept because it is busy). */
  warnings?: readonly string[] | undefined;
  /** Host path of the sandbox's private workspace (a seeded copy); undefined for rw and host runs. */
  privateWorkspace?: string | undefined;
  /**
   * Runs `fn` while no process in the sandbox can run (the container paused), resuming it after;
   * what `fn` reads of the private workspace cannot change under it. Undefined where the backend
   * cannot pause.
   */
  freeze?: (<T>(fn: () => Promise<T>) => Promise<T>) | undefined;
  /**
   * The private workspace's changes, read with no process in the sandbox running and never by a
   * program on the host (`SandboxLease.changes`). Undefined where the backend cannot do both.
   */
  changes?: WorkspaceChanges | undefined;
  /**
   * Forwards a loopback port inside the sandbox to `destination` in cordon's process (each
   * connection made there arrives as a duplex): how a host-side service such as the model gateway
   * is offered to a sandbox that has no network. Undefined where the backend cannot.
   */
  forwardPort?: ((destination: (channel: Duplex) => void) => Promise<ForwardedPort>) | undefined;
  release(): Promise<void>;
}

/** A port forwarded into a sandbox: 127.0.0.1:`port` there, until `close()`. */
export interface ForwardedPort {
  port: number;
  close(): void;
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
  acquire(plan: RunPlan, options: ProvideSandboxOptions): Promise<ProvidedSandbox>;
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
}
