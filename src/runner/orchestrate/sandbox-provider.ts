import type { Sandbox } from "../../sandbox/index.js";
import type { PlannedRun } from "./planned-run.js";

/** What acquiring a sandbox reports while it works (image build, seeding, container start). */
export interface SandboxProgress {
  phase: string;
  message: string;
}

/** A sandbox held for one run; `release` hands it back (the container stays for reuse). */
export interface SandboxLease {
  sandbox: Sandbox;
  /** True when the sandbox was created for this run (a new container or workspace). */
  fresh: boolean;
  release(): Promise<void>;
}

export interface AcquireOptions {
  signal?: AbortSignal | undefined;
  onProgress?: ((progress: SandboxProgress) => void) | undefined;
}

/**
 * Maps a plan to the sandbox its tools run in: a container by scope key when the plan is
 * sandboxed, the host confined to the workspace when it is not. Injected, so embedders can bring
 * their own backend and unit tests an in-memory one.
 */
export type SandboxProvider = (plan: PlannedRun, options: AcquireOptions) => Promise<SandboxLease>;
