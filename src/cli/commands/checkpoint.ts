import type { Command } from "commander";

import { ConfigError } from "../../common/index.js";
import {
  isMissedTurn,
  type CheckpointListEntry,
  type CheckpointTarget,
} from "../../changes/index.js";
import type { CliContext } from "../context.js";
import { withInterrupt } from "../interrupt.js";
import { printable } from "../printable.js";
import { addPlanOptions, runnerFromFlags, type PlanFlags } from "../runner-flags.js";

interface JsonFlag extends PlanFlags {
  json?: boolean;
}

interface RollbackFlags extends JsonFlag {
  turn?: string;
  stopProcesses?: boolean;
}

/** `cordon checkpoint`, `cordon checkpoints`, `cordon rollback` (docs/checkpoints.md). */
export function registerCheckpointCommands(program: Command, context: CliContext): void {
  const checkpoint = program
    .command("checkpoint")
    .argument("[name]", "a name for it (default cp-<n>): letters, digits, . _ -")
    .description(
      "record the state of a session's private copy (every file, deletions and modes) so `cordon rollback` can return to it",
    );
  addPlanOptions(checkpoint)
    .option("--json", "print the checkpoint as JSON")
    .action(async (name: string | undefined, flags: JsonFlag) => {
      const runner = runnerFromFlags(context, flags);
      const taken = await withInterrupt(
        context,
        (signal) =>
          runner.checkpoint({
            agentId: flags.agent,
            sessionKey: flags.session,
            name,
            signal,
            onProgress: (progress) => context.stderr(`· ${progress.message}\n`),
          }),
        () => "stopped before the checkpoint was recorded; the copy is unchanged",
      );
      if (flags.json) {
        context.stdout(`${JSON.stringify(taken)}\n`);
        return;
      }
      context.stdout(`${taken.name}\n`);
      context.stderr(
        `checkpoint ${taken.name}: ${taken.changedFiles} file(s) changed since the one before; \`cordon rollback ${taken.name}\` returns to it\n`,
      );
    });

  const list = program
    .command("checkpoints")
    .description(
      "list a session copy's checkpoints: name, time, files changed since the previous one (and turns whose record failed, marked missed)",
    );
  addPlanOptions(list)
    .option("--json", "print them as JSON")
    .action(async (flags: JsonFlag) => {
      const runner = runnerFromFlags(context, flags);
      let uncounted: string | undefined;
      const all = await runner.checkpoints({
        agentId: flags.agent,
        sessionKey: flags.session,
        onUncounted: (reason) => (uncounted = reason),
      });
      if (flags.json) {
        context.stdout(`${JSON.stringify(all)}\n`);
        return;
      }
      if (all.length === 0) {
        context.stderr(
          "no checkpoints yet: runs take one before each turn's tools (sandbox.checkpoints), `cordon checkpoint NAME` takes one now\n",
        );
        return;
      }
      context.stdout(formatCheckpoints(all));
      if (all.some((entry) => !isMissedTurn(entry) && entry.changedFiles === undefined)) {
        context.stderr(`? = not counted: ${uncountedLine(uncounted)}\n`);
      }
    });

  const rollback = program
    .command("rollback")
    .argument("[name]", "the checkpoint to return to (`cordon checkpoints` lists them)")
    .description(
      "return a session's private copy to a checkpoint, undoing file edits and shell commands alike; the state it replaces is kept as a checkpoint",
    );
  addPlanOptions(rollback)
    .option(
      "--turn <-N>",
      "the state before the N-th last turn that ran tools (-1: undo the last turn)",
    )
    .option(
      "--stop-processes",
      "stop the sandbox first, so no process the agent started keeps running (default: they are left and listed)",
    )
    .option("--json", "print what was done as JSON")
    .action(async (name: string | undefined, flags: RollbackFlags) => {
      const target = rollbackTarget(name, flags.turn);
      const runner = runnerFromFlags(context, flags);
      const outcome = await withInterrupt(
        context,
        (signal) =>
          runner.rollback({
            agentId: flags.agent,
            sessionKey: flags.session,
            to: target,
            stopProcesses: flags.stopProcesses,
            signal,
            onProgress: (progress) => context.stderr(`· ${progress.message}\n`),
          }),
        () =>
          "stopped: if the copy was being written, `cordon checkpoints` lists the before-rollback state to return to",
      );
      const changed = [...outcome.changed.entries()];
      if (flags.json) {
        context.stdout(
          `${JSON.stringify({
            restored: outcome.restored,
            saved: outcome.saved,
            changed: changed.map(([file, now]) => ({ path: file, deleted: now === "deleted" })),
            processesLeft: outcome.processesLeft,
            processesStopped: outcome.processesStopped,
          })}\n`,
        );
        return;
      }
      for (const [file, now] of changed) {
        context.stdout(`  ${now === "deleted" ? "removed " : "restored"} ${printable(file)}\n`);
      }
      context.stderr(
        `rolled back to ${outcome.restored.name} (${changed.length} file(s)); the state it replaced is checkpoint ${outcome.saved.name}\n`,
      );
      if (outcome.processesLeft.length > 0) {
        context.stderr(
          `still running in the sandbox (left as they are; --stop-processes stops them):\n${outcome.processesLeft.map((line) => `  ${printable(line)}\n`).join("")}`,
        );
      }
    });
}

/** A rollback's target from its argument and `--turn`: exactly one of them. */
export function rollbackTarget(
  name: string | undefined,
  turn: string | undefined,
): CheckpointTarget {
  if (name !== undefined && turn !== undefined) {
    throw new ConfigError("give a checkpoint name or --turn, not both", {
      fix: "`cordon rollback NAME` or `cordon rollback --turn -1`",
    });
  }
  if (turn !== undefined) {
    if (!/^-[1-9]\d{0,5}$/.test(turn)) {
      throw new ConfigError(`--turn takes a negative whole number, not ${JSON.stringify(turn)}`, {
        fix: "--turn -1 undoes the last turn, --turn -2 the last two",
      });
    }
    return { turn: Number(turn) };
  }
  if (name === undefined) {
    throw new ConfigError("name the checkpoint to return to, or give --turn -N", {
      fix: "`cordon checkpoints` lists them; `cordon rollback --turn -1` undoes the last turn",
    });
  }
  return { name };
}

/**
 * The line under a listing with `?` counts: why they could not be taken when the listing was told
 * (the engine did not answer, the sandbox image is not built), else the one cause without an
 * error (a checkpoint's tree gone from the store).
 */
export function uncountedLine(reason: string | undefined): string {
  return reason === undefined
    ? "a turn's changed files are counted when listed, and its checkpoint's tree is gone from the store"
    : `a turn's changed files are counted when listed, and that failed: ${printable(reason)}`;
}

/**
 * One line per checkpoint: name, when, why, files changed since the one before. A turn whose
 * record failed has its line too ("missed", and why), so the listing shows the gap that
 * `rollback --turn` refuses to cross silently.
 */
export function formatCheckpoints(entries: readonly CheckpointListEntry[]): string {
  const width = Math.max(4, ...entries.map((entry) => entry.name.length));
  const lines = [`${"NAME".padEnd(width)}  TAKEN                     CHANGED  WHY`];
  for (const entry of entries) {
    const turn = `before turn ${entry.turn ?? "?"}${entry.sessionKey ? ` of ${entry.sessionKey}` : ""}`;
    const why = isMissedTurn(entry)
      ? `${turn}: not recorded (${entry.missed}), so no rollback returns here`
      : entry.kind === "turn"
        ? turn
        : entry.kind === "rollback"
          ? "replaced by a rollback"
          : "cordon checkpoint";
    // Uncounted: a turn's whose tree is no longer in the store.
    const changed = isMissedTurn(entry) ? "missed" : String(entry.changedFiles ?? "?");
    lines.push(
      `${entry.name.padEnd(width)}  ${entry.at.padEnd(24)}  ${changed.padStart(7)}  ${printable(why)}`,
    );
  }
  return `${lines.join("\n")}\n`;
}
