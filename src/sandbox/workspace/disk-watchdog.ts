import { realpath } from "node:fs/promises";
import path from "node:path";

import { SandboxError } from "../../common/index.js";
import { diskBudgetSupport } from "./disk-budget.js";
import { mountCountAt } from "./mount-table.js";

/** How often a running sandbox's unbounded workspace is measured (ms). */
export const defaultWatchdogIntervalMs = 10_000;

/** A sandbox wrote more to its private workspace than `sandbox.disk` allows. */
export class DiskBudgetExceededError extends SandboxError {
  override readonly code = "disk_budget_exceeded";
}

/** One thing the watchdog measures against the budget. */
interface DiskMeter {
  /** What it is, as the error names it: "its private workspace /x". */
  what: string;
  /** Its size now, in bytes. */
  bytes: () => Promise<number>;
  /** Why cordon had to watch it instead of bounding it. */
  why: string;
  fix: string;
  /**
   * Bytes it cannot take more of, known without measuring (a copy just seeded: cordon counted
   * what it wrote). Within the budget, it answers the first check (the one before the sandbox
   * starts) in place of a measurement; every later check measures.
   */
  atMost?: number | undefined;
}

/**
 * Where the disk budget cannot be enforced by the kernel, the next best thing: what the sandbox
 * can write to disk unbounded — its private workspace where it cannot be a bounded filesystem
 * (see disk-budget.ts) or a Docker volume on the engine, its root filesystem when `readOnlyRoot`
 * is false (overlay2 has no size limit on ext4) — is measured before the sandbox starts and every few seconds while it is held,
 * and a sandbox past its budget is stopped with an error that says why. It can overshoot by what
 * the agent writes in one interval; the host never runs out silently.
 */
export class DiskWatchdog {
  private timer: NodeJS.Timeout | undefined;
  private measuring = false;
  private tripped: DiskBudgetExceededError | undefined;

  private constructor(
    private readonly meters: DiskMeter[],
    private readonly budgetBytes: number,
    private readonly intervalMs: number,
  ) {}

  /**
   * A watchdog for what the kernel does not bound; undefined when there is no budget, or nothing
   * to watch (a bounded workspace image and a read-only root).
   */
  static async for(options: {
    /**
     * The private workspace as a plain directory on this host: its path, and the bytes it takes
     * (`workspaceUsage`, measured in a throwaway container). Watched unless it is a mounted image.
     */
    workspace?: { path: string; bytes: () => Promise<number> } | undefined;
    diskBytes: number | undefined;
    /** Bytes in the container's writable root layer, when its root is writable. */
    rootLayerBytes?: (() => Promise<number>) | undefined;
    /**
     * A copy kept in a Docker volume on the engine, which no driver bounds on disk: its name and
     * the bytes it takes there (`workspaceUsage`); `atMost`, see `DiskMeter`.
     */
    volume?:
      { name: string; bytes: () => Promise<number>; atMost?: number | undefined } | undefined;
    /** For messages: the sandbox's name. */
    containerName: string;
    intervalMs?: number | undefined;
  }): Promise<DiskWatchdog | undefined> {
    const { workspace, diskBytes, containerName } = options;
    if (diskBytes === undefined) return undefined;
    const meters: DiskMeter[] = [];
    if (workspace !== undefined && !(await isBoundedImage(workspace.path))) {
      meters.push({
        what: `its private workspace ${workspace.path}`,
        bytes: () => workspace.bytes(),
        why: "this machine cannot bound the workspace itself",
        fix: `delete what it wrote (\`cordon sandbox rm ${containerName}\` removes the workspace and its changes), or raise sandbox.disk; run cordon as root to have the kernel enforce the budget`,
      });
    }
    const volume = options.volume;
    if (volume) {
      meters.push({
        what: `its private workspace (the Docker volume ${volume.name})`,
        bytes: () => volume.bytes(),
        why: "the engine cannot bound a volume on disk",
        fix: `delete what it wrote (\`cordon sandbox rm ${containerName}\` removes the copy and its changes), or raise sandbox.disk`,
        atMost: volume.atMost,
      });
    }
    const rootLayerBytes = options.rootLayerBytes;
    if (rootLayerBytes) {
      meters.push({
        what: "its root filesystem (sandbox.docker.readOnlyRoot is false)",
        bytes: () => rootLayerBytes(),
        why: "the engine cannot bound a container's root filesystem here",
        fix: `\`cordon sandbox rm ${containerName}\` gives it a fresh root; keep sandbox.docker.readOnlyRoot true (work goes to /workspace, bounded), or raise sandbox.disk`,
      });
    }
    if (meters.length === 0) return undefined;
    return new DiskWatchdog(meters, diskBytes, options.intervalMs ?? defaultWatchdogIntervalMs);
  }

  /** The error of the check that found the budget exceeded; undefined until one does. */
  get exceeded(): DiskBudgetExceededError | undefined {
    return this.tripped;
  }

  /** Throws `DiskBudgetExceededError` when something is over budget (now, or at any check before). */
  async assertWithinBudget(): Promise<void> {
    if (this.tripped) throw this.tripped;
    for (const meter of this.meters) {
      const atMost = meter.atMost;
      // Once: from now on the sandbox may write.
      meter.atMost = undefined;
      if (atMost !== undefined && atMost <= this.budgetBytes) continue;
      const used = await meter.bytes();
      if (used <= this.budgetBytes) continue;
      this.tripped = new DiskBudgetExceededError(
        `the sandbox wrote ${mebibytes(used)} to ${meter.what}, more than sandbox.disk allows (${mebibytes(this.budgetBytes)}); cordon stopped it, because ${meter.why}`,
        { fix: meter.fix },
      );
      throw this.tripped;
    }
  }

  /** Measures every interval until `stop()`; calls `onExceeded` once, then stops. */
  start(onExceeded: (error: DiskBudgetExceededError) => void): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.measuring) return;
      this.measuring = true;
      this.assertWithinBudget()
        .catch((error: unknown) => {
          if (error instanceof DiskBudgetExceededError) {
            this.stop();
            onExceeded(error);
          }
        })
        .finally(() => (this.measuring = false));
    }, this.intervalMs);
    // A watchdog must not keep the process alive by itself.
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}

/** Whether a private workspace is a mounted image (the kernel bounds it). */
async function isBoundedImage(workspace: string): Promise<boolean> {
  const parent = await realpath(path.dirname(workspace)).catch(() => path.dirname(workspace));
  const resolved = path.join(parent, path.basename(workspace));
  return (await diskBudgetSupport()).enforced && (await mountCountAt(resolved)) > 0;
}

function mebibytes(bytes: number): string {
  return `${Math.round(bytes / 1024 ** 2)} MiB`;
}
