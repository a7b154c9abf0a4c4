import { performance } from "node:perf_hooks";

import {
  keepCheckpoint,
  noteMissedTurn,
  recordCheckpointState,
  type RecordedCheckpointState,
} from "../../changes/index.js";
import { messageOf, type Logger } from "../../common/index.js";
import type { RunPlan } from "../../policy/index.js";
import type { SandboxLease } from "../../sandbox/index.js";

/** What the run reports of each turn's checkpoint (a `checkpoint` event). */
export interface TurnCheckpointEvent {
  type: "checkpoint";
  /** The run's turn whose tools run next. */
  turn: number;
  /** The checkpoint's name (`turn-<n>`); absent when it failed. */
  name?: string | undefined;
  /** Files changed since the checkpoint before it. */
  changedFiles?: number | undefined;
  /**
   * Milliseconds the turn's tools waited for it: the record runs beside the model's answer, so
   * this is 0 when it had finished by then.
   */
  durationMs: number;
  /** Milliseconds the record itself took (what it cost the sandbox and the machine). */
  recordMs?: number | undefined;
  /** Why none was taken; the turn's tools ran all the same. */
  error?: string | undefined;
}

/**
 * The loop's hooks that keep a checkpoint of the seeded copy per turn (`sandbox.checkpoints:
 * "turn"`), so `cordon rollback --turn -1` undoes the last turn, shell commands included.
 *
 * The state before turn N's tools is recorded as soon as it exists — when the run starts, and
 * when turn N-1's tools have finished — and the record runs while the model answers; turn N's
 * tools wait for it, then it is added to the list as `turn-<n>`. A turn therefore pays only what
 * is left of the record when the model's answer comes. What the checkpoint holds is the copy as
 * the turn before left it: a process that turn left running, and that writes while the model
 * answers, writes after the checkpoint (the record is paused while such a process runs, so it is
 * one state all the same). A state no turn's tools follow (the run ended) is dropped. A record
 * that fails is a warning and a `checkpoint` event with `error`, and the list notes that turn as
 * missing (`noteMissedTurn`), so a rollback to it says so; the turn goes on: losing undo must not
 * lose the run.
 */
export interface TurnCheckpointHooks {
  /** The loop's `beforeToolCalls`: waits for the state before this turn's tools, and keeps it. */
  beforeToolCalls: (turn: number) => Promise<void>;
  /** The loop's `afterToolCalls`: starts recording the state before the next turn's tools. */
  afterToolCalls: (turn: number) => void;
  /**
   * Waits for a record still running when the run ends (its state is not kept), so nothing reads
   * the copy once the sandbox is released. Never rejects.
   */
  settle: () => Promise<void>;
}

type RecordOutcome = { recordMs: number } & (
  { state: RecordedCheckpointState } | { error: unknown }
);

/**
 * The hooks, with the first record (the copy as the run finds it) already started. Undefined
 * when the plan takes no checkpoints or the sandbox cannot record its copy.
 */
export function turnCheckpointHooks(options: {
  plan: RunPlan;
  lease: SandboxLease;
  emit: (event: TurnCheckpointEvent) => void;
  logger: Logger;
  signal?: AbortSignal | undefined;
}): TurnCheckpointHooks | undefined {
  const { plan, lease, logger } = options;
  if (plan.sandbox.checkpoints !== "turn" || !lease.checkpoints || !lease.privateWorkspace) {
    return undefined;
  }
  // A spare recording inspector kept started, so a record waits for no container start.
  void lease.checkpoints.prepare?.();
  let pending: Promise<RecordOutcome> | undefined;
  const start = (): Promise<RecordOutcome> => {
    // One record at a time: one started while another runs (never, in the loop's order) waits.
    const before = pending ?? Promise.resolve();
    const record = before.then(async (): Promise<RecordOutcome> => {
      const startedAt = performance.now();
      try {
        const state = await recordCheckpointState(lease, { kind: "turn", signal: options.signal });
        return { state, recordMs: performance.now() - startedAt };
      } catch (error) {
        return { error, recordMs: performance.now() - startedAt };
      }
    });
    pending = record;
    return record;
  };
  const missed = async (turn: number, error: unknown, timing: Timing): Promise<void> => {
    logger.warn({ err: error, turn }, "the turn's checkpoint failed; its tools run all the same");
    options.emit({ type: "checkpoint", turn, ...timing, error: messageOf(error) });
    await noteMissedTurn(lease, { sessionKey: plan.sessionKey, reason: messageOf(error) }).catch(
      (noted: unknown) => {
        logger.warn({ err: noted, turn }, "cannot note the missed checkpoint in the list");
      },
    );
  };
  // Never rejects: a failed record is an outcome, reported by the turn that waits for it.
  void start();
  return {
    beforeToolCalls: async (turn) => {
      const waitStarted = performance.now();
      const outcome = await (pending ?? start());
      pending = undefined;
      const timing = {
        durationMs: Math.round(performance.now() - waitStarted),
        recordMs: Math.round(outcome.recordMs),
      };
      if ("error" in outcome) return missed(turn, outcome.error, timing);
      try {
        const checkpoint = await keepCheckpoint(lease, outcome.state, {
          kind: "turn",
          sessionKey: plan.sessionKey,
        });
        options.emit({
          type: "checkpoint",
          turn,
          name: checkpoint.name,
          changedFiles: checkpoint.changedFiles,
          ...timing,
        });
      } catch (error) {
        await missed(turn, error, timing);
      }
    },
    afterToolCalls: () => {
      void start();
    },
    settle: async () => {
      const last = pending;
      pending = undefined;
      const outcome = await last;
      if (outcome && "error" in outcome) {
        // No turn's tools followed it, so no turn lost its checkpoint.
        logger.debug({ err: outcome.error }, "the record after the last turn failed");
      }
    },
  };
}

interface Timing {
  durationMs: number;
  recordMs: number;
}
