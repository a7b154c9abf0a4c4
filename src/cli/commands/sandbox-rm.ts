import type { Command } from "commander";

import {
  AbortedError,
  ConfigError,
  CordonError,
  exitCodeOf,
  messageOf,
} from "../../common/index.js";
import {
  UnappliedChangesError,
  type RemovedSandbox,
  type SandboxInventory,
} from "../../sandbox/index.js";
import { confirmOnTerminal } from "../confirm.js";
import type { CliContext } from "../context.js";
import { withInterrupt } from "../interrupt.js";
import { describeOrphan, inventoryFor } from "./sandbox-list.js";
import { resolveSandboxName } from "./sandbox-names.js";

interface RmFlags {
  all?: boolean;
  keepWorkspace?: boolean;
  discardChanges?: boolean;
  json?: boolean;
}

function describeRemoved(removed: RemovedSandbox): string {
  const parts = [removed.containerId ? "container" : "record"];
  if (removed.workspace) parts.push(`workspace ${removed.workspace}`);
  if (removed.keptWorkspace) parts.push(`kept its workspace ${removed.keptWorkspace}`);
  return `removed ${removed.name} (${parts.join(", ")})\n`;
}

function reportFailure(context: CliContext, error: unknown): void {
  const fix = CordonError.is(error) && error.fix ? `  fix: ${error.fix}\n` : "";
  context.stderr(`cordon: ${messageOf(error)}\n${fix}`);
  if (context.exitCode === 0) context.exitCode = exitCodeOf(error);
}

/**
 * A sandbox refused for its unapplied changes: removed anyway only if the user says so on a
 * terminal; without one it stays refused (exit 2), and the message says how to discard.
 */
async function removeIfConfirmed(
  context: CliContext,
  inventory: SandboxInventory,
  refused: UnappliedChangesError,
  signal: AbortSignal,
): Promise<RemovedSandbox | undefined> {
  const answer = await confirmOnTerminal(
    context,
    `${refused.message}.\n  ${refused.fix ?? ""}\nRemove ${refused.sandbox} and lose them?`,
  );
  if (answer !== true) {
    reportFailure(context, refused);
    return undefined;
  }
  return inventory.remove(refused.sandbox, {
    discardChanges: true,
    onWait: (message) => context.stderr(`· ${message}\n`),
    signal,
  });
}

/**
 * What a `sandbox rm` stopped by Ctrl-C did: a removal waiting behind another command's freeze is
 * stopped there, with nothing of that sandbox removed; one under way is finished; none is begun.
 */
class RemovalProgress {
  readonly removed: RemovedSandbox[] = [];
  /** The sandbox whose wait for another command's freeze was stopped. */
  stoppedWaiting: string | undefined;
  /** Names given that were not tried yet (never known for `--all`). */
  untried: string[] = [];

  /** Runs one removal; false once stopped, which the stop's line says rather than a failure. */
  async remove(
    name: string,
    signal: AbortSignal,
    remove: () => Promise<RemovedSandbox | undefined>,
  ): Promise<boolean> {
    try {
      const entry = await remove();
      if (entry) this.removed.push(entry);
    } catch (error) {
      if (!(error instanceof AbortedError && signal.aborted)) throw error;
      this.stoppedWaiting = name;
    }
    return !signal.aborted;
  }

  describeStop(): string {
    const parts: string[] = [];
    const waited = this.stoppedWaiting;
    if (waited)
      parts.push(
        `stopped waiting for the command that has ${waited} frozen; ${waited} is as it was`,
      );
    const removed = this.removed.map((entry) => entry.name);
    if (removed.length > 0) parts.push(`removed ${removed.join(", ")}`);
    else if (!waited) parts.push("nothing was removed");
    if (this.untried.length > 0) parts.push(`not removed: ${this.untried.join(", ")}`);
    return parts.join("; ");
  }
}

/**
 * Removes the named sandboxes (or all), then those refused for unapplied changes if the user says
 * so; returns the refused ones. Stops once `signal` aborts (see `RemovalProgress`).
 */
async function removeRequested(input: {
  context: CliContext;
  inventory: SandboxInventory;
  names: readonly string[];
  flags: RmFlags;
  progress: RemovalProgress;
  signal: AbortSignal;
}): Promise<UnappliedChangesError[]> {
  const { context, inventory, progress, signal } = input;
  const removeOptions = {
    keepWorkspace: input.flags.keepWorkspace ?? false,
    discardChanges: input.flags.discardChanges ?? false,
    // A rollback or diff holding the sandbox frozen is waited for: say why nothing happens.
    onWait: (message: string) => context.stderr(`· ${message}\n`),
    // Ctrl-C stops such a wait; the line the stop prints says what was left.
    signal,
  };
  const refused: UnappliedChangesError[] = [];
  if (input.flags.all) {
    const result = await inventory.removeAll(removeOptions);
    progress.removed.push(...result.removed);
    refused.push(...result.refused);
  } else {
    const known = await inventory.list();
    progress.untried = [...input.names];
    // Each name on its own: one that fails does not keep the others.
    for (const word of input.names) {
      progress.untried.shift();
      try {
        const name = resolveSandboxName(word, known);
        const remove = () => inventory.remove(name, removeOptions);
        if (!(await progress.remove(name, signal, remove))) return refused;
      } catch (error) {
        if (error instanceof UnappliedChangesError) refused.push(error);
        else reportFailure(context, error);
      }
    }
  }
  for (const error of refused) {
    if (signal.aborted) break;
    try {
      const confirmed = () => removeIfConfirmed(context, inventory, error, signal);
      if (!(await progress.remove(error.sandbox, signal, confirmed))) break;
    } catch (failure) {
      reportFailure(context, failure);
    }
  }
  return refused;
}

export function registerSandboxRmCommand(sandbox: Command, context: CliContext): void {
  sandbox
    .command("rm")
    .description("remove sandboxes: their containers, private workspaces and records")
    .argument(
      "[names...]",
      "container names as `cordon sandbox list` shows them, a unique prefix, or a session's name",
    )
    .option("--all", "remove every sandbox of this state directory")
    .option("--keep-workspace", "keep the private workspaces (seeded copies with unreviewed work)")
    .option(
      "--discard-changes",
      "remove sandboxes whose private copies hold changes `cordon apply` never applied (asked on a terminal otherwise)",
    )
    .option("--json", "print what was removed as JSON")
    .action(async (names: string[], options: RmFlags) => {
      if (names.length === 0 && !options.all) {
        throw new ConfigError("name the sandboxes to remove, or pass --all", {
          fix: "`cordon sandbox list` shows the names",
        });
      }
      if (names.length > 0 && options.all) {
        throw new ConfigError("give names or --all, not both", {
          fix: "drop the names to remove everything, or drop --all",
        });
      }
      const inventory = inventoryFor(context);
      const progress = new RemovalProgress();
      const refused = await withInterrupt(
        context,
        (signal) =>
          removeRequested({ context, inventory, names, flags: options, progress, signal }),
        () => progress.describeStop(),
      );
      const { removed } = progress;
      if (options.json) {
        // Refused ones were reported on stderr, like any sandbox that could not be removed.
        context.stdout(`${JSON.stringify(removed, null, 2)}\n`);
        return;
      }
      for (const entry of removed) context.stdout(describeRemoved(entry));
      if (
        removed.length === 0 &&
        refused.length === 0 &&
        options.all &&
        !context.signals?.interruption
      ) {
        // What a failed removal may leave: a record and a copy without a container. Not removed
        // here (its work is checked by prune), but never hidden behind "nothing to remove".
        const orphans = await inventory.orphans();
        context.stderr(
          orphans.length === 0 ? "no sandboxes to remove\n" : "no sandbox containers to remove\n",
        );
        for (const orphan of orphans) context.stderr(describeOrphan(orphan));
      }
    });
}
