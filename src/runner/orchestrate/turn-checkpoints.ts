import { createCheckpoint } from "../../changes/index.js";
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
  /** Milliseconds the turn waited for it. */
  durationMs: number;
  /** Why none was taken; the turn's tools ran all the same. */
  error?: string | undefined;
}

/**
 * The loop's `beforeToolCalls` that records the seeded copy before each turn's tools run (`sandbox.checkpoints:
 * "turn"`), so `cordon rollback --turn -1` undoes the last turn, shell commands included. A spare
 * recording inspector is kept started, so a turn waits only for the record itself and the pause.
 * A checkpoint that fails is reported and the turn goes on: losing undo must not lose the run.
 * Undefined when the plan takes none or the sandbox cannot.
 */
export function turnCheckpointHook(options: {
  plan: RunPlan;
  lease: SandboxLease;
  emit: (event: TurnCheckpointEvent) => void;
  logger: Logger;
  signal?: AbortSignal | undefined;
}): ((turn: number) => Promise<void>) | undefined {
  const { plan, lease } = options;
  if (plan.sandbox.checkpoints !== "turn" || !lease.checkpoints || !lease.privateWorkspace) {
    return undefined;
  }
  void lease.checkpoints.prepare?.();
  return async (turn) => {
    const startedAt = Date.now();
    try {
      const checkpoint = await createCheckpoint(lease, {
        kind: "turn",
        sessionKey: plan.sessionKey,
        signal: options.signal,
      });
      options.emit({
        type: "checkpoint",
        turn,
        name: checkpoint.name,
        changedFiles: checkpoint.changedFiles,
        durationMs: Date.now() - startedAt,
      });
    } catch (error) {
      options.logger.warn(
        { err: error },
        "the turn's checkpoint failed; its tools run all the same",
      );
      options.emit({
        type: "checkpoint",
        turn,
        durationMs: Date.now() - startedAt,
        error: messageOf(error),
      });
    }
  };
}
