import type { Command } from "commander";

import { ConfigError, CordonError, exitCodeOf, messageOf } from "../../common/index.js";
import {
  UnappliedChangesError,
  type RemovedSandbox,
  type SandboxInventory,
} from "../../sandbox/index.js";
import { confirmOnTerminal } from "../confirm.js";
import type { CliContext } from "../context.js";
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
  });
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
      const removeOptions = {
        keepWorkspace: options.keepWorkspace ?? false,
        discardChanges: options.discardChanges ?? false,
        // A rollback or diff holding the sandbox frozen is waited for: say why nothing happens.
        onWait: (message: string) => context.stderr(`· ${message}\n`),
      };
      const removed: RemovedSandbox[] = [];
      const refused: UnappliedChangesError[] = [];
      if (options.all) {
        const result = await inventory.removeAll(removeOptions);
        removed.push(...result.removed);
        refused.push(...result.refused);
      } else {
        const known = await inventory.list();
        // Each name on its own: one that fails does not keep the others.
        for (const word of names) {
          try {
            const name = resolveSandboxName(word, known);
            removed.push(await inventory.remove(name, removeOptions));
          } catch (error) {
            if (error instanceof UnappliedChangesError) refused.push(error);
            else reportFailure(context, error);
          }
        }
      }
      for (const error of refused) {
        try {
          const entry = await removeIfConfirmed(context, inventory, error);
          if (entry) removed.push(entry);
        } catch (failure) {
          reportFailure(context, failure);
        }
      }
      if (options.json) {
        // Refused ones were reported on stderr, like any sandbox that could not be removed.
        context.stdout(`${JSON.stringify(removed, null, 2)}\n`);
        return;
      }
      for (const entry of removed) context.stdout(describeRemoved(entry));
      if (removed.length === 0 && refused.length === 0 && options.all) {
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
