import type { Command } from "commander";

import type { PruneReport } from "../../sandbox/index.js";
import type { CliContext } from "../context.js";
import { parseDuration } from "./parse-duration.js";
import { inventoryFor } from "./sandbox-list.js";

function formatReport(report: PruneReport): string {
  const verb = report.dryRun ? "would remove" : "removed";
  const lines: string[] = [];
  for (const entry of report.removed) {
    lines.push(
      `${verb} ${entry.name} (${entry.reason}${entry.workspace ? `; workspace ${entry.workspace}` : ""})`,
    );
  }
  for (const orphan of report.orphans) lines.push(`${verb} ${orphan.path} (${orphan.reason})`);
  for (const skipped of report.skipped) lines.push(`kept ${skipped.name} (${skipped.reason})`);
  if (lines.length === 0) lines.push("nothing to prune");
  return `${lines.join("\n")}\n`;
}

export function registerSandboxPruneCommand(sandbox: Command, context: CliContext): void {
  sandbox
    .command("prune")
    .description(
      "remove stopped sandboxes, idle or old ones, and private workspaces and records whose container is gone",
    )
    .option("--idle <duration>", "also remove sandboxes unused for this long (e.g. 30m, 2h, 7d)")
    .option("--max-age <duration>", "also remove sandboxes created this long ago, busy or not")
    .option("--dry-run", "show what would be removed; remove nothing")
    .option("--json", "print the report as JSON")
    .action(
      async (options: { idle?: string; maxAge?: string; dryRun?: boolean; json?: boolean }) => {
        const report = await inventoryFor(context).prune({
          idleMs: options.idle === undefined ? undefined : parseDuration(options.idle, "--idle"),
          maxAgeMs:
            options.maxAge === undefined ? undefined : parseDuration(options.maxAge, "--max-age"),
          dryRun: options.dryRun ?? false,
        });
        context.stdout(
          options.json ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report),
        );
      },
    );
}
