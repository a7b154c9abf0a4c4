import { execFile } from "node:child_process";
import { realpath } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";

import { SandboxError } from "../../common/index.js";
import { diskBudgetSupport } from "./disk-budget.js";
import { mountCountAt } from "./mount-table.js";

const run = promisify(execFile);

/** How often a running sandbox's unbounded workspace is measured (ms). */
export const defaultWatchdogIntervalMs = 10_000;

/**
 * Bytes the files below `workspace` take on the host's disk (allocated blocks, so a sparse file
 * counts as what it really takes). Measured with `du -s -x -k`, on purpose not with a walk of our
 * own: du walks by file descriptor and never follows a symbolic link (POSIX: `-P` is its default),
 * and `-x` keeps it on the workspace's filesystem, so a tree the agent keeps changing while it is
 * measured can make the figure wrong but can never send the walk outside the workspace. What du
 * cannot read (a directory the agent made unreadable to cordon's user) is not counted.
 */
export async function workspaceUsageBytes(
  workspace: string,
  signal?: AbortSignal,
): Promise<number> {
  let stdout: string;
  try {
    ({ stdout } = await run("du", ["-s", "-x", "-k", workspace], { signal, maxBuffer: 1 << 20 }));
  } catch (error) {
    // Exit 1 with a total: some entries could not be read (or vanished while walked).
    const partial = (error as { stdout?: unknown }).stdout;
    if (typeof partial !== "string" || !/^\d+/.test(partial)) throw error;
    stdout = partial;
  }
  return Number(/^(\d+)/.exec(stdout)?.[1] ?? 0) * 1024;
}

/** A sandbox wrote more to its private workspace than `sandbox.disk` allows. */
export class DiskBudgetExceededError extends SandboxError {
  override readonly code = "disk_budget_exceeded";
}

function exceeded(workspace: string, used: number, budget: number): DiskBudgetExceededError {
  return new DiskBudgetExceededError(
    `the sandbox wrote ${mebibytes(used)} to its private workspace ${workspace}, more than sandbox.disk allows (${mebibytes(budget)}); cordon stopped it, because this machine cannot bound the workspace itself`,
    {
      fix: `delete what it wrote (\`cordon sandbox rm ${path.basename(workspace)}\` removes the workspace and its changes), or raise sandbox.disk; run cordon as root to have the kernel enforce the budget`,
    },
  );
}

/**
 * Where the disk budget cannot be a bounded filesystem (see disk-budget.ts), the next best
 * thing: the workspace is measured before the sandbox starts and every few seconds while it is
 * held, and a sandbox past its budget is stopped with an error that says why. It can overshoot by
 * what the agent writes in one interval; the host never runs out silently.
 */
export class DiskWatchdog {
  private timer: NodeJS.Timeout | undefined;
  private measuring = false;
  private tripped: DiskBudgetExceededError | undefined;

  private constructor(
    private readonly workspace: string,
    private readonly budgetBytes: number,
    private readonly intervalMs: number,
  ) {}

  /**
   * A watchdog for a private workspace with a budget the kernel does not enforce (a plain
   * directory); undefined when there is no budget or the workspace is a bounded image.
   */
  static async for(options: {
    workspace: string | undefined;
    diskBytes: number | undefined;
    intervalMs?: number | undefined;
  }): Promise<DiskWatchdog | undefined> {
    const { workspace, diskBytes } = options;
    if (workspace === undefined || diskBytes === undefined) return undefined;
    const parent = await realpath(path.dirname(workspace)).catch(() => path.dirname(workspace));
    const resolved = path.join(parent, path.basename(workspace));
    if ((await diskBudgetSupport()).enforced && (await mountCountAt(resolved)) > 0)
      return undefined;
    return new DiskWatchdog(workspace, diskBytes, options.intervalMs ?? defaultWatchdogIntervalMs);
  }

  /** Throws `DiskBudgetExceededError` when the workspace is over budget (now, or at any check before). */
  async assertWithinBudget(signal?: AbortSignal): Promise<void> {
    if (this.tripped) throw this.tripped;
    const used = await workspaceUsageBytes(this.workspace, signal);
    if (used > this.budgetBytes) {
      this.tripped = exceeded(this.workspace, used, this.budgetBytes);
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

function mebibytes(bytes: number): string {
  return `${Math.round(bytes / 1024 ** 2)} MiB`;
}
