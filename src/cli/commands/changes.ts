import type { Command } from "commander";

import { ConfigError } from "../../common/index.js";
import {
  ChangesNotReviewedError,
  applyChanges,
  assertSeededFrom,
  changesAlreadyApplied,
  forgetShownChanges,
  lastShownDigest,
  parsePatch,
  patchDigest,
  patchStat,
  recordShownChanges,
  takeChanges,
  type PatchedFile,
} from "../../changes/index.js";
import type { Runner } from "../../runner/index.js";
import { recordAppliedChanges } from "../../sandbox/index.js";
import type { CliContext } from "../context.js";
import { withInterrupt } from "../interrupt.js";
import { printable } from "../printable.js";
import { paintPatch } from "../render/colors.js";
import { addPlanOptions, runnerFromFlags, type PlanFlags } from "../runner-flags.js";
import { inventoryFor } from "./sandbox-list.js";

interface DiffFlags extends PlanFlags {
  stat?: boolean;
  json?: boolean;
}

interface ApplyFlags extends PlanFlags {
  check?: boolean;
  yes?: boolean;
  json?: boolean;
}

interface SessionChanges {
  patch: Uint8Array;
  /** The real workspace the changes go to. */
  workspace: string;
  containerName: string;
}

/** The patch of a session's seeded copy, taken from its sandbox. */
async function sessionChanges(
  context: CliContext,
  runner: Runner,
  flags: PlanFlags,
  signal: AbortSignal,
): Promise<SessionChanges> {
  const request = { agentId: flags.agent, sessionKey: flags.session };
  const plan = await runner.plan(request);
  const spec = plan.sandbox.spec;
  if (
    !plan.sandbox.enabled ||
    plan.sandbox.workspaceAccess !== "none" ||
    !spec?.seed ||
    !spec.privateWorkspace
  ) {
    throw new ConfigError(
      `session ${plan.sessionKey} does not work on a seeded private copy (${plan.sandbox.enabled ? `workspaceAccess ${plan.sandbox.workspaceAccess}` : "not sandboxed"}), so there is nothing to diff`,
      {
        fix: 'diff and apply are for sandbox.workspaceAccess "none" with sandbox.seed true (the default); with rw or mode off the changes are already in the workspace: use git diff there',
      },
    );
  }
  // Reading a session's changes must not make it a sandbox: a mistyped --session would otherwise
  // create and start a fresh container (and seed a copy) only to find it unchanged.
  const sandboxes = await inventoryFor(context).list();
  if (!sandboxes.some((sandbox) => sandbox.name === spec.containerName)) {
    throw new ConfigError(
      `no sandbox for session ${plan.sessionKey} in ${plan.agent.workspace}: no run has used it here, or its sandbox was removed`,
      {
        fix: "`cordon sessions list` shows this project's sessions and `cordon sandbox list` their sandboxes; name one with --session",
      },
    );
  }
  const { lease } = await runner.acquireSandbox({
    ...request,
    signal,
    readsChanges: true,
    onProgress: (progress) => context.stderr(`· ${progress.message}\n`),
  });
  try {
    await assertSeededFrom(spec.privateWorkspace, plan.agent.workspace, plan.sessionKey);
    return {
      patch: await takeChanges(lease, { signal }),
      workspace: plan.agent.workspace,
      containerName: spec.containerName,
    };
  } finally {
    await lease.release();
  }
}

function describeFiles(files: readonly PatchedFile[]): string {
  return files
    .map((file) => {
      const from = file.from ? `${printable(file.from)} → ` : "";
      return `  ${file.change.padEnd(8)} ${from}${printable(file.path)}${file.binary ? " (binary)" : ""}\n`;
    })
    .join("");
}

/**
 * How apply decided: `reviewed` (the hash `cordon diff` showed), `confirmed` (changed since, shown
 * again and accepted with --yes), `refused` (changed since, shown again, nothing written),
 * `checked` (--check: nothing written either way), `already-applied` (the workspace holds them).
 */
type ApplyDecision = "reviewed" | "confirmed" | "refused" | "checked" | "already-applied";

export function registerChangesCommands(program: Command, context: CliContext): void {
  const diff = program
    .command("diff")
    .description(
      "the changes a session made to its seeded private copy, as a git patch; `cordon apply` applies exactly what this shows",
    );
  addPlanOptions(diff)
    .option("--stat", "list the changed files instead of the patch")
    .option("--json", "print {files, patch, sha256} as JSON")
    .action(async (flags: DiffFlags) => {
      const runner = runnerFromFlags(context, flags);
      const { patch, containerName, workspace } = await withInterrupt(
        context,
        (signal) => sessionChanges(context, runner, flags, signal),
        () => "stopped reading the changes; the sandbox keeps them, nothing was recorded",
      );
      const files = parsePatch(patch);
      const sha256 = await recordShownChanges(runner.stateDir, containerName, patch);
      const text = Buffer.from(patch).toString("utf8");
      if (flags.json) {
        context.stdout(`${JSON.stringify({ files, patch: text, sha256 })}\n`);
        return;
      }
      context.stdout(
        flags.stat ? await patchStat(workspace, patch) : paintPatch(text, context.paint.stdout),
      );
      context.stderr(
        files.length === 0
          ? "no changes\n"
          : `sha256 ${sha256}: \`cordon apply\` applies exactly these changes\n`,
      );
    });

  const apply = program
    .command("apply")
    .description(
      "apply a session's changes to the real workspace, all or nothing: only the changes `cordon diff` last showed (else they are shown again)",
    );
  addPlanOptions(apply)
    .option("--check", "only check that they apply cleanly; write nothing")
    .option("--yes", "apply the changes even if they differ from what `cordon diff` last showed")
    .option("--json", "print {files, applied, sha256, decision} as JSON")
    .action(async (flags: ApplyFlags) => {
      const runner = runnerFromFlags(context, flags);
      let applied = false;
      await withInterrupt(
        context,
        async (signal) => {
          const taken = await sessionChanges(context, runner, flags, signal);
          const sha256 = patchDigest(taken.patch);
          const shown = await lastShownDigest(runner.stateDir, taken.containerName);
          const reviewed = shown === sha256;
          const files = parsePatch(taken.patch);
          if (files.length === 0) {
            if (flags.json) {
              context.stdout(`${JSON.stringify({ files, applied: false, sha256 })}\n`);
            } else context.stderr("no changes to apply\n");
            return;
          }
          if (await changesAlreadyApplied(taken.workspace, taken.patch)) {
            // A second `cordon apply`: nothing moved underneath, the work is done.
            await recordAppliedChanges(runner.stateDir, taken.containerName, sha256);
            if (flags.json) {
              context.stdout(
                `${JSON.stringify({ files, applied: false, sha256, decision: "already-applied" })}\n`,
              );
            } else
              context.stderr(`these changes are already in the workspace (sha256 ${sha256})\n`);
            return;
          }
          if (!reviewed && !flags.check) {
            // Changed since the review (or never reviewed): these bytes are shown now, and so are
            // what a second `cordon apply` applies if they stay the same.
            await recordShownChanges(runner.stateDir, taken.containerName, taken.patch);
            if (!flags.json) {
              context.stdout(describeFiles(files));
              context.stdout(
                paintPatch(Buffer.from(taken.patch).toString("utf8"), context.paint.stdout),
              );
            }
            context.stderr(
              `sha256 ${sha256}: ${shown ? `not the changes \`cordon diff\` showed (sha256 ${shown})` : "`cordon diff` has not shown these changes"}\n`,
            );
            if (!flags.yes) {
              if (flags.json) {
                const patch = Buffer.from(taken.patch).toString("utf8");
                context.stdout(
                  `${JSON.stringify({ files, applied: false, sha256, decision: "refused", patch })}\n`,
                );
              }
              throw new ChangesNotReviewedError(
                "the changes in the sandbox are not the ones last reviewed, so nothing was written; they are shown above",
                {
                  fix: "review them, then run `cordon apply` again to apply exactly these (same sha256), or `cordon apply --yes`",
                },
              );
            }
          }
          const outcome = await applyChanges(taken.workspace, taken.patch, {
            check: flags.check ?? false,
          });
          applied = outcome.applied;
          if (outcome.applied) {
            // Prune and rm may now remove the sandbox: its work is in the real workspace.
            await recordAppliedChanges(runner.stateDir, taken.containerName, sha256);
            await forgetShownChanges(runner.stateDir, taken.containerName);
          }
          const decision: ApplyDecision = flags.check
            ? "checked"
            : reviewed
              ? "reviewed"
              : "confirmed";
          if (flags.json) {
            context.stdout(`${JSON.stringify({ ...outcome, sha256, decision })}\n`);
            return;
          }
          if (reviewed || flags.check) context.stdout(describeFiles(outcome.files));
          context.stderr(
            outcome.applied
              ? `applied ${outcome.files.length} file change(s) (sha256 ${sha256})\n`
              : `the changes apply cleanly (${outcome.files.length} file(s), sha256 ${sha256}${reviewed ? "" : ", not the ones `cordon diff` last showed"}); run without --check to apply\n`,
          );
        },
        () =>
          applied
            ? "stopped after the changes were applied"
            : "stopped before applying: nothing was written to the workspace",
      );
    });
}
