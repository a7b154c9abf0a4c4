import type { Duplex } from "node:stream";

import type { Sandbox } from "./sandbox.js";
import type { WorkspaceChanges } from "./workspace/workspace-changes.js";
import type { WorkspaceCheckpoints } from "./workspace/workspace-checkpoints.js";

/**
 * A sandbox held by one user (a run, a command, a diff); `release()` hands it back (idempotent)
 * and the container stays for the next acquire of its scope key. The one handle every backend
 * returns: what a backend cannot do is undefined rather than a type of its own.
 */
export interface SandboxLease {
  sandbox: Sandbox;
  /**
   * True when this acquire created the sandbox (a new container or workspace): nothing of earlier
   * runs is in it.
   */
  fresh: boolean;
  /**
   * Things the user should know (workspace ownership, seeding skips, a busy container kept on an
   * older config).
   */
  warnings?: readonly string[] | undefined;
  /** Host path of the private workspace (a seeded copy); undefined for rw and host sandboxes. */
  privateWorkspace?: string | undefined;
  /**
   * Runs `fn` while no process in the sandbox can run or write (the container paused), and
   * resumes it afterwards whatever `fn` did; what `fn` reads of the private workspace cannot change
   * under it. Throws, with `fn`'s result dropped, when the container was resumed by someone else
   * meanwhile; a stopped container is left as it is. Undefined where the backend cannot pause.
   */
  freeze?: (<T>(fn: () => Promise<T>) => Promise<T>) | undefined;
  /**
   * The private workspace's changes since seeding, read with no process in the sandbox running and
   * never by a program on the host (a throwaway inspector container). Undefined for rw, where the
   * changes are in the workspace, and where the backend cannot do both.
   */
  changes?: WorkspaceChanges | undefined;
  /**
   * The private workspace's checkpoints, recorded and restored with the sandbox frozen and never
   * by a program on the host (a throwaway inspector container). Undefined as `changes` is;
   * `prepare` (where offered) says a record per turn is coming, so one is kept ready (it resolves
   * once one is).
   */
  checkpoints?: (WorkspaceCheckpoints & { prepare?: () => Promise<void> }) | undefined;
  /**
   * The command lines of the processes the agent started that still run in the sandbox (its
   * background servers, a command left running); none when it is stopped. Undefined where the
   * backend cannot list them.
   */
  processes?: (() => Promise<string[]>) | undefined;
  /**
   * Forwards a loopback port inside the sandbox to `destination` in cordon's process (each
   * connection made there arrives as a duplex): how a host-side service such as the model gateway
   * is offered to a sandbox that has no network. Undefined where the backend cannot.
   */
  forwardPort?: ((destination: (channel: Duplex) => void) => Promise<ForwardedPort>) | undefined;
  /**
   * A connection to 127.0.0.1:`port` inside the sandbox, made from within it (`cordon
   * port-forward`): the sandbox needs no network for it. Undefined where the backend cannot.
   */
  connectPort?: ((port: number) => Promise<Duplex>) | undefined;
  release(): Promise<void>;
}

/** A port forwarded into a sandbox: 127.0.0.1:`port` there, until `close()`. */
export interface ForwardedPort {
  port: number;
  close(): void;
}
