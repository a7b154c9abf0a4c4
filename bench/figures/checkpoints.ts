import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";

import {
  countCheckpointChanges,
  createCheckpoint,
  listCheckpointEntries,
  rollbackToCheckpoint,
} from "../../src/changes/index.js";
import type { BenchContext } from "../context.js";
import { compare, timeInTurns } from "../measure.js";
import type { FigureResult } from "../report.js";
import { withTarget } from "../report.js";
import { modelDelayMs, turnLatency } from "./checkpoint-turns.js";
import { FailureCount } from "./failures.js";
import { makeRepository, repositoryFiles } from "./seeded-session.js";

/** The budget: a turn's checkpoint within three execs (held to the record itself). */
const budget = 3;
const changedFiles = 10;

/**
 * What `sandbox.checkpoints: "turn"` costs on a seeded 600-file repository with 10 changed files,
 * two ways, both printed:
 * - the record itself (`createCheckpoint`, as a run records and keeps a turn's state), against one
 *   exec of `true` in the same sandbox: nothing runs in the sandbox between turns here, so the
 *   sandbox's executor is asked twice (before and after) instead of the sandbox being paused, a
 *   spare inspector's recorder (started ahead and ready: its cache loaded, git fast-import
 *   waiting) is sent the request and records the copy's tree from the cache the first, untimed,
 *   checkpoints kept (reading the files whose stat changed, writing one pack), and the list is
 *   appended. This is the budget;
 * - what it adds to a turn of the agent loop whose model answers in `modelDelayMs`: a run records
 *   the state a turn's tools left while the model answers, so the next turn waits only for what
 *   is left of it (`turnLatency`, against the same turns with checkpoints off).
 * A rollback (a restore inspector started cold, the copy written back) is shown against the same
 * exec, without a target.
 */
export async function checkpointsFigure(ctx: BenchContext): Promise<FigureResult> {
  const runs = ctx.quick ? 3 : 10;
  const failures = new FailureCount();
  const root = await mkdtemp(path.join(tmpdir(), "cordon-bench-checkpoints-"));
  const spec = { ...(await ctx.spec("checkpoints")), seed: true };
  try {
    const repository = path.join(root, "repo");
    await mkdir(repository);
    await makeRepository(repository);
    const lease = await ctx.manager.acquire(
      { ...spec, agentWorkspace: repository },
      { signal: ctx.signal },
    );
    try {
      const source = { privateWorkspace: lease.privateWorkspace, checkpoints: lease.checkpoints };
      await lease.checkpoints?.prepare?.();
      const change = async (round: number): Promise<void> => {
        for (let index = 0; index < changedFiles; index += 1) {
          await lease.sandbox.files.writeFile(
            `/workspace/src/module${index}/file0.ts`,
            `// changed by the bench, round ${round}\n`,
          );
        }
      };
      await change(0);
      const first = await createCheckpoint(source, { kind: "turn" });
      ctx.progress(
        `checkpoints: ${runs} turn checkpoints of a ${repositoryFiles}-file copy with ${changedFiles} changed files, beside one exec`,
      );
      const timings = await timeInTurns(
        {
          // The next turn's edits are made after the timing (the returned function), and the
          // next spare recorder is waited for there: in a run it starts while the model answers
          // (a second or more), so a turn waits for the record, not for a container start.
          turn: (run) =>
            failures.guard(async () => {
              await createCheckpoint(source, { kind: "turn" });
              return async () => {
                await change(run + 10);
                await lease.checkpoints?.prepare?.();
              };
            }),
          exec: () => failures.guard(() => lease.sandbox.exec("true")),
        },
        runs,
        1,
      );
      // What a listing adds: the turns' counts, taken then (one inspector, started cold). The
      // last turn's must be the files the bench changed.
      const listed = await listCheckpointEntries(lease.privateWorkspace ?? "");
      const countStarted = performance.now();
      const counted = await failures.guard(() =>
        countCheckpointChanges(listed, (pairs, options) =>
          lease.checkpoints ? lease.checkpoints.compare(pairs, options) : Promise.resolve([]),
        ),
      );
      const countMs = performance.now() - countStarted;
      const last = counted?.at(-1);
      const recorded = last && "changedFiles" in last ? last.changedFiles : undefined;
      // Apart, so a rollback's rewrites are not what the next turn's checkpoint counts.
      const rollbacks = await timeInTurns(
        {
          rollback: (run) =>
            failures.guard(async () => {
              await rollbackToCheckpoint(source, { name: first.name });
              return () => change(run + 100);
            }),
          exec: () => failures.guard(() => lease.sandbox.exec("true")),
        },
        ctx.quick ? 2 : 5,
        1,
      );
      if (recorded !== changedFiles) failures.count += 1;
      ctx.progress(
        `checkpoints: turns of the agent loop with a ${modelDelayMs} ms model, checkpoints "turn" and "off" in turn`,
      );
      const turns = await turnLatency(ctx, repository, failures);
      return {
        name: "checkpoints",
        title: `a checkpoint per turn of a seeded ${repositoryFiles}-file copy`,
        comparisons: [
          withTarget(
            {
              measures: `a turn's checkpoint, the record itself (${changedFiles} files changed since the last, nothing running: 2 executor questions + the request to a spare's recorder started ahead, its walk and one fast-import pack, uncounted + list)`,
              ...compare(timings.turn, timings.exec, execBaseline),
            },
            budget,
          ),
          {
            measures: `a turn with checkpoints "turn" (a model answering in ${modelDelayMs} ms, an exec writing ${changedFiles} files; ${turns.turnsPerRun} a run)`,
            ...compare(
              turns.withCheckpoints,
              turns.without,
              'the same turn with checkpoints "off"',
            ),
          },
          {
            measures: `a rollback of ${changedFiles} files (a restore inspector started cold, freeze, the copy written back)`,
            ...compare(rollbacks.rollback, rollbacks.exec, execBaseline),
          },
        ],
        failures: failures.count,
        details: {
          runs,
          files: repositoryFiles,
          changedFiles,
          changedSinceLast: recorded ?? "uncounted",
          // `cordon checkpoints` counting every turn's changes (one inspector started cold).
          listedTurns: listed.length,
          countListedMs: Math.round(countMs),
          modelDelayMs,
          // What the checkpoint adds to a turn whose model takes modelDelayMs (medians' difference).
          addedTurnLatencyMs:
            Math.round((turns.withCheckpoints.medianMs - turns.without.medianMs) * 10) / 10,
          // In those runs: each record's own time (beside the model's answer), and what the
          // turn's tools waited for it (0 when it was done), medians.
          recordInRunMs: Math.round(turns.recordInRun.medianMs * 10) / 10,
          waitedInRunMs: Math.round(turns.waitedInRun.medianMs * 10) / 10,
          ...failures.details(),
        },
      };
    } finally {
      await lease.release();
    }
  } finally {
    await ctx.inventory.remove(spec.containerName).catch(() => undefined);
    await rm(root, { recursive: true, force: true });
  }
}

const execBaseline = "one exec of `true` in the same sandbox";
