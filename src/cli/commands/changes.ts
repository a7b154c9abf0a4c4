import type { Command } from "commander";

import { ConfigError } from "../../common/index.js";
import { applyChanges, parsePatch, takeChanges, type PatchedFile } from "../../changes/index.js";
import type { Runner } from "../../runner/index.js";
import type { CliContext } from "../context.js";
import { withInterrupt } from "../interrupt.js";
import { addPlanOptions, runnerFromFlags, type PlanFlags } from "../runner-flags.js";

interface DiffFlags extends PlanFlags {
  stat?: boolean;
  json?: boolean;
}

interface ApplyFlags extends PlanFlags {
  check?: boolean;
  json?: boolean;
}

/** The patch of a session's seeded copy, taken inside its sandbox. */
async function sessionChanges(
  context: CliContext,
  runner: Runner,
  flags: PlanFlags,
  signal: AbortSignal,
): Promise<{ patch: Uint8Array; workspace: string }> {
  const request = { agentId: flags.agent, sessionKey: flags.session };
  const plan = await runner.plan(request);
  if (
    !plan.sandbox.enabled ||
    plan.sandbox.workspaceAccess !== "none" ||
    !plan.sandbox.spec?.seed
  ) {
    throw new ConfigError(
      `session ${plan.sessionKey} does not work on a seeded private copy (${plan.sandbox.enabled ? `workspaceAccess ${plan.sandbox.workspaceAccess}` : "not sandboxed"}), so there is nothing to diff`,
      {
        fix: 'diff and apply are for sandbox.workspaceAccess "none" with sandbox.seed true (the default); with rw or mode off the changes are already in the workspace: use git diff there',
      },
    );
  }
  const { lease } = await runner.acquireSandbox({
    ...request,
    signal,
    onProgress: (progress) => context.stderr(`· ${progress.message}\n`),
  });
  try {
    return { patch: await takeChanges(lease.sandbox, { signal }), workspace: plan.agent.workspace };
  } finally {
    await lease.release();
  }
}

function describeFiles(files: readonly PatchedFile[]): string {
  return files
    .map((file) => {
      const from = file.from ? `${file.from} → ` : "";
      return `  ${file.change.padEnd(8)} ${from}${file.path}${file.binary ? " (binary)" : ""}\n`;
    })
    .join("");
}

export function registerChangesCommands(program: Command, context: CliContext): void {
  const diff = program
    .command("diff")
    .description("the changes a session made to its seeded private copy, as a git patch");
  addPlanOptions(diff)
    .option("--stat", "list the changed files instead of the patch")
    .option("--json", "print {files, patch} as JSON")
    .action(async (flags: DiffFlags) => {
      const runner = runnerFromFlags(context, flags);
      const { patch } = await withInterrupt(context, (signal) =>
        sessionChanges(context, runner, flags, signal),
      );
      const text = Buffer.from(patch).toString("utf8");
      const files = parsePatch(patch);
      if (flags.json) {
        context.stdout(`${JSON.stringify({ files, patch: text })}\n`);
      } else if (flags.stat) {
        context.stdout(describeFiles(files));
      } else {
        context.stdout(text);
      }
      if (files.length === 0 && !flags.json) context.stderr("no changes\n");
    });

  const apply = program
    .command("apply")
    .description("apply a session's changes to the real workspace, all or nothing");
  addPlanOptions(apply)
    .option("--check", "only check that they apply cleanly; write nothing")
    .option("--json", "print {files, applied} as JSON")
    .action(async (flags: ApplyFlags) => {
      const runner = runnerFromFlags(context, flags);
      const outcome = await withInterrupt(context, async (signal) => {
        const { patch, workspace } = await sessionChanges(context, runner, flags, signal);
        return applyChanges(workspace, patch, { check: flags.check ?? false });
      });
      if (flags.json) {
        context.stdout(`${JSON.stringify(outcome)}\n`);
        return;
      }
      if (outcome.files.length === 0) {
        context.stderr("no changes to apply\n");
        return;
      }
      context.stdout(describeFiles(outcome.files));
      context.stderr(
        outcome.applied
          ? `applied ${outcome.files.length} file change(s)\n`
          : `the changes apply cleanly (${outcome.files.length} file(s)); run without --check to apply\n`,
      );
    });
}
