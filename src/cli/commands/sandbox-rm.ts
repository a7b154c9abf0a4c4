import type { Command } from "commander";

import { ConfigError, CordonError, exitCodeOf, messageOf } from "../../common/index.js";
import type { RemovedSandbox } from "../../sandbox/index.js";
import type { CliContext } from "../context.js";
import { inventoryFor } from "./sandbox-list.js";

function describeRemoved(removed: RemovedSandbox): string {
  const parts = [removed.containerId ? "container" : "record"];
  if (removed.workspace) parts.push(`workspace ${removed.workspace}`);
  if (removed.keptWorkspace) parts.push(`kept its workspace ${removed.keptWorkspace}`);
  return `removed ${removed.name} (${parts.join(", ")})\n`;
}

export function registerSandboxRmCommand(sandbox: Command, context: CliContext): void {
  sandbox
    .command("rm")
    .description("remove sandboxes: their containers, private workspaces and records")
    .argument("[names...]", "container names, as `cordon sandbox list` shows them")
    .option("--all", "remove every sandbox of this state directory")
    .option("--keep-workspace", "keep the private workspaces (seeded copies with unreviewed work)")
    .option("--json", "print what was removed as JSON")
    .action(
      async (
        names: string[],
        options: { all?: boolean; keepWorkspace?: boolean; json?: boolean },
      ) => {
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
        const removeOptions = { keepWorkspace: options.keepWorkspace ?? false };
        const removed: RemovedSandbox[] = [];
        if (options.all) {
          removed.push(...(await inventory.removeAll(removeOptions)));
        } else {
          // Each name on its own: one that fails does not keep the others.
          for (const name of names) {
            try {
              removed.push(await inventory.remove(name, removeOptions));
            } catch (error) {
              const fix = CordonError.is(error) && error.fix ? `  fix: ${error.fix}\n` : "";
              context.stderr(`cordon: ${messageOf(error)}\n${fix}`);
              if (context.exitCode === 0) context.exitCode = exitCodeOf(error);
            }
          }
        }
        if (options.json) {
          context.stdout(`${JSON.stringify(removed, null, 2)}\n`);
          return;
        }
        for (const entry of removed) context.stdout(describeRemoved(entry));
        if (removed.length === 0 && options.all) context.stderr("no sandboxes to remove\n");
      },
    );
}
