import type { Command } from "commander";

import {
  describeUnapplied,
  type KeptForChanges,
  type PruneReport,
  type UnappliedChanges,
} from "../../sandbox/index.js";
import type { CliContext } from "../context.js";
import { parseDuration } from "./parse-duration.js";
import { inventoryFor } from "./sandbox-list.js";

interface PruneFlags {
  idle?: string;
  maxAge?: string;
  dryRun?: boolean;
  discardChanges?: boolean;
  force?: boolean;
  json?: boolean;
}

/** "; 3 changed files never applied: `cordon diff …` in /project shows them". */
function describeChanges(changes: UnappliedChanges, verb: string): string {
  const what = describeUnapplied(changes);
  if (!changes.review) return `; ${verb} ${what}`;
  const where = changes.project ? ` in ${changes.project}` : "";
  return `; ${verb} ${what} (\`${changes.review}\`${where} shows them)`;
}

function describeKept(kept: KeptForChanges): string {
  if (!kept.changes) return `kept ${kept.name} (${kept.reason})`;
  const { review, project } = kept.changes;
  const show = review
    ? `: \`${review}\`${project ? ` in ${project}` : ""} shows them, \`${review.replace(/^cordon diff/, "cordon apply")}\` applies them`
    : "";
  return `kept ${kept.name} (${kept.reason}${show})`;
}

function formatReport(report: PruneReport): string {
  const verb = report.dryRun ? "would remove" : "removed";
  const discard = report.dryRun ? "would discard" : "discarded";
  const lines: string[] = [];
  for (const entry of report.removed) {
    const changes = entry.discardedChanges ? describeChanges(entry.discardedChanges, discard) : "";
    lines.push(
      `${verb} ${entry.name} (${entry.reason}${entry.workspace ? `; workspace ${entry.workspace}` : ""}${changes})`,
    );
  }
  for (const orphan of report.orphans) {
    const changes = orphan.discardedChanges
      ? describeChanges(orphan.discardedChanges, discard)
      : "";
    lines.push(`${verb} ${orphan.path} (${orphan.reason}${changes})`);
  }
  for (const skipped of report.skipped) lines.push(`kept ${skipped.name} (${skipped.reason})`);
  for (const kept of report.keptForChanges) lines.push(describeKept(kept));
  if (report.keptForChanges.length > 0) {
    lines.push("--discard-changes removes them too, and their changes with them");
  }
  if (lines.length === 0) lines.push("nothing to prune");
  return `${lines.join("\n")}\n`;
}

export function registerSandboxPruneCommand(sandbox: Command, context: CliContext): void {
  sandbox
    .command("prune")
    .description(
      "remove stopped sandboxes, idle or old ones, private workspaces and records whose container is gone, and support volumes (executor, hosts files) no container mounts; a private copy holding changes never applied is kept",
    )
    .option("--idle <duration>", "also remove sandboxes unused for this long (e.g. 30m, 2h, 7d)")
    .option("--max-age <duration>", "also remove sandboxes created this long ago, busy or not")
    .option("--dry-run", "show what would be removed; remove nothing")
    .option(
      "--discard-changes",
      "also remove sandboxes whose private copies hold changes `cordon apply` never applied",
    )
    .option("--force", "the same as --discard-changes")
    .option("--json", "print the report as JSON")
    .action(async (options: PruneFlags) => {
      const report = await inventoryFor(context).prune({
        idleMs: options.idle === undefined ? undefined : parseDuration(options.idle, "--idle"),
        maxAgeMs:
          options.maxAge === undefined ? undefined : parseDuration(options.maxAge, "--max-age"),
        dryRun: options.dryRun ?? false,
        discardChanges: (options.discardChanges ?? false) || (options.force ?? false),
        onWait: (message) => context.stderr(`· ${message}\n`),
      });
      context.stdout(options.json ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report));
    });
}
