import { randomUUID } from "node:crypto";

import {
  countCheckpointChanges,
  createCheckpoint,
  listCheckpointEntries,
  rollbackToCheckpoint,
  type Checkpoint,
  type CheckpointListEntry,
  type CheckpointTarget,
} from "../../changes/index.js";
import {
  ConfigError,
  CordonError,
  SandboxError,
  messageOf,
  type Logger,
} from "../../common/index.js";
import type { RunPlan } from "../../policy/index.js";
import type { CheckpointRequest, PlanRequest, Runner } from "../create-runner.js";
import { assertHasBaseline } from "../../sandbox/index.js";
import {
  appendSessionNote,
  SessionBusyError,
  acquireSessionLock,
  sandboxesHeldByRuns,
} from "../session/index.js";
import type { SandboxLease } from "../../sandbox/index.js";
import type { SandboxProgress, SandboxProvider } from "./sandbox-provider.js";

/**
 * A session's checkpoints as commands and library calls see them (`cordon checkpoint`,
 * `checkpoints`, `rollback`; `Runner.checkpoint`, `checkpoints`, `rollback`): the plan says which
 * copy, the sandbox backend records and restores it, changes/checkpoints.ts keeps the list.
 */
export interface SessionCheckpointsContext {
  plan: RunPlan;
  sandboxes: SandboxProvider;
  stateDir: string;
  signal?: AbortSignal | undefined;
  onProgress?: ((progress: SandboxProgress) => void) | undefined;
}

/** What a rollback of a session did. */
export interface SessionRollback {
  /** The checkpoint the copy now matches. */
  restored: Checkpoint;
  /** The state it replaced, kept as `before-rollback-<n>`: roll back to it to undo this. */
  saved: Checkpoint;
  /** Paths that changed, each with what it is now (`<mode> <id>` or `deleted`). */
  changed: Map<string, string>;
  /** Processes the agent started that were left running (their command lines). */
  processesLeft: string[];
  /** True when the sandbox was stopped first (`stopProcesses`): nothing the agent started runs. */
  processesStopped: boolean;
}

/**
 * The seeded private copy a session works in, which must exist: otherwise a usage error (exit 2)
 * naming why there is none and what to do.
 */
export async function seededCopyOf(plan: RunPlan): Promise<string> {
  const spec = plan.sandbox.spec;
  if (
    !plan.sandbox.enabled ||
    plan.sandbox.workspaceAccess !== "none" ||
    !spec?.seed ||
    !spec.privateWorkspace
  ) {
    throw new ConfigError(
      `session ${plan.sessionKey} does not work on a seeded private copy (${plan.sandbox.enabled ? `workspaceAccess ${plan.sandbox.workspaceAccess}` : "not sandboxed"}), so it has no checkpoints`,
      {
        fix: 'checkpoints and rollback are for sandbox.workspaceAccess "none" with sandbox.seed true (the default); with rw or mode off the agent writes your workspace itself: use git there',
      },
    );
  }
  try {
    await assertHasBaseline(spec.privateWorkspace);
  } catch {
    throw new ConfigError(
      `session ${plan.sessionKey} has no private copy in ${plan.agent.workspace}: no run has used it here, or its sandbox was removed`,
      {
        fix: "`cordon sessions list` shows this project's sessions and `cordon sandbox list` their sandboxes; name one with --session",
      },
    );
  }
  return spec.privateWorkspace;
}

/**
 * The session's checkpoints and the turns that missed theirs, oldest first, each checkpoint with
 * its count of changed files: turns' are counted now (`countCheckpointChanges`), through the
 * backend, which reads only the checkpoint store. A count that cannot be taken (the engine does
 * not answer, the sandbox image is not built) leaves the entries uncounted rather than the list
 * unread: it is only a number. Why goes to `onUncounted` (`uncountedReason`).
 */
export async function sessionCheckpoints(
  plan: RunPlan,
  sandboxes: SandboxProvider,
  logger: Logger,
  options: { onUncounted?: ((reason: string) => void) | undefined } = {},
): Promise<CheckpointListEntry[]> {
  const entries = await listCheckpointEntries(await seededCopyOf(plan));
  const compare = sandboxes.compareCheckpoints?.bind(sandboxes);
  if (!compare) return entries;
  return countCheckpointChanges(entries, (pairs, options) => compare(plan, pairs, options)).catch(
    (error: unknown) => {
      logger.debug({ err: error }, "cannot count the checkpoints' changed files");
      options.onUncounted?.(uncountedReason(error));
      return entries;
    },
  );
}

/** Why the counts could not be taken, as a person reads it: the error, and its fix when it has one. */
export function uncountedReason(error: unknown): string {
  const fix = CordonError.is(error) ? error.fix : undefined;
  return fix ? `${messageOf(error)} (${fix})` : messageOf(error);
}

/** Records the session's copy as it is now, as a named checkpoint. */
export async function checkpointSession(
  context: SessionCheckpointsContext,
  options: { name?: string | undefined } = {},
): Promise<Checkpoint> {
  await seededCopyOf(context.plan);
  return withLease(context, (lease) =>
    createCheckpoint(lease, {
      name: options.name,
      sessionKey: context.plan.sessionKey,
      signal: context.signal,
    }),
  );
}

/**
 * Puts the session's copy back to a checkpoint. No run may hold the session or its sandbox
 * (refused, exit 3, naming the holder), and the session's lock is held meanwhile so none starts;
 * the sandbox is frozen while the copy is read and written. Processes the agent started are left
 * running and listed, or, with `stopProcesses`, ended by stopping the sandbox first (the next run
 * starts it again). The session's transcript gets a note, so the agent's next turn knows.
 */
export async function rollbackSession(
  context: SessionCheckpointsContext,
  options: { target: CheckpointTarget; stopProcesses?: boolean | undefined },
): Promise<SessionRollback> {
  const { plan, stateDir } = context;
  await seededCopyOf(plan);
  const containerName = plan.sandbox.spec?.containerName ?? "";
  const held = (await sandboxesHeldByRuns(stateDir)).holderOf({
    name: containerName,
    session: plan.sessionKey,
  });
  if (held) throw busy(plan, `its sandbox ${containerName} is ${held}`);
  const lock = await acquireSessionLock({
    stateDir,
    sessionKey: plan.sessionKey,
    project: plan.agent.workspaceId,
    runId: `rollback-${randomUUID()}`,
    agentId: plan.agent.id,
    workspace: plan.agent.workspace,
    wait: false,
    signal: context.signal,
  }).catch((error: unknown) => {
    throw error instanceof SessionBusyError ? busy(plan, error.message) : error;
  });
  try {
    if (options.stopProcesses) {
      if (!context.sandboxes.stop) {
        throw new SandboxError("this sandbox backend cannot stop a sandbox's processes", {
          fix: "roll back without --stop-processes; the processes are listed",
        });
      }
      await context.sandboxes.stop(plan);
    }
    const outcome = await withLease(context, async (lease) => {
      const processesLeft = options.stopProcesses ? [] : ((await lease.processes?.()) ?? []);
      const rolledBack = await rollbackToCheckpoint(lease, options.target, {
        sessionKey: plan.sessionKey,
        signal: context.signal,
      });
      return { ...rolledBack, processesLeft, processesStopped: options.stopProcesses === true };
    });
    await noteInTranscript(context, outcome);
    return outcome;
  } finally {
    await lock.release();
  }
}

function busy(plan: RunPlan, why: string): SessionBusyError {
  return new SessionBusyError(`cannot roll back session ${plan.sessionKey}: ${why}`, {
    fix: `wait for that run to end (\`cordon ps\` lists it, \`cordon logs -f --session ${plan.sessionKey}\` follows it) or stop it, then roll back`,
  });
}

async function withLease<T>(
  context: SessionCheckpointsContext,
  fn: (lease: SandboxLease) => Promise<T>,
): Promise<T> {
  const lease = await context.sandboxes.acquire(context.plan, {
    signal: context.signal,
    onProgress: context.onProgress,
  });
  try {
    return await fn(lease);
  } finally {
    await lease.release();
  }
}

/** Files named in the transcript's note; the rest are counted. */
const notedFiles = 20;

/** A user message the agent reads before its next turn: what changed under it, and why. */
export function rollbackNote(outcome: SessionRollback): string {
  const { restored, changed } = outcome;
  const when = restored.kind === "turn" && restored.turn ? ` (before turn ${restored.turn})` : "";
  const files = [...changed.entries()];
  const listed = files
    .slice(0, notedFiles)
    .map(([file, now]) => `- ${file}${now === "deleted" ? " (removed)" : ""}`);
  if (files.length > notedFiles) listed.push(`- and ${files.length - notedFiles} more`);
  const processes = outcome.processesStopped
    ? "The sandbox was stopped first, so no process you started is running any more."
    : outcome.processesLeft.length > 0
      ? `Processes you started are still running and may hold the old state: ${outcome.processesLeft.join("; ")}.`
      : "";
  return [
    `[cordon] The user rolled /workspace back to checkpoint ${restored.name}${when}, taken ${restored.at}. Files changed after it are as they were then; ignored files were left alone.`,
    files.length > 0
      ? `Files put back (${files.length}):\n${listed.join("\n")}`
      : "No file differed.",
    processes,
    `Read files again before relying on what you saw earlier. The state it replaced is kept as checkpoint ${outcome.saved.name}.`,
  ]
    .filter((line) => line !== "")
    .join("\n");
}

async function noteInTranscript(
  context: SessionCheckpointsContext,
  outcome: SessionRollback,
): Promise<void> {
  await appendSessionNote({
    stateDir: context.stateDir,
    sessionKey: context.plan.sessionKey,
    project: context.plan.agent.workspaceId,
    text: rollbackNote(outcome),
    signal: context.signal,
  });
}

/** `Runner.checkpoint`, `checkpoints` and `rollback`, over the runner's plan and sandboxes. */
export function sessionCheckpointCalls(runner: {
  plan: (request: PlanRequest) => Promise<RunPlan>;
  sandboxes: SandboxProvider;
  stateDir: string;
  logger: Logger;
  /** Counts the work as in flight, so the runner's `close()` waits for it. */
  track: <T>(work: Promise<T>) => Promise<T>;
}): Pick<Runner, "checkpoint" | "checkpoints" | "rollback"> {
  const contextOf = async (request: CheckpointRequest): Promise<SessionCheckpointsContext> => ({
    plan: await runner.plan(request),
    sandboxes: runner.sandboxes,
    stateDir: runner.stateDir,
    signal: request.signal,
    onProgress: request.onProgress,
  });
  return {
    checkpoint: async (request = {}) =>
      runner.track(checkpointSession(await contextOf(request), { name: request.name })),
    checkpoints: async (request = {}) =>
      sessionCheckpoints(await runner.plan(request), runner.sandboxes, runner.logger, {
        onUncounted: request.onUncounted,
      }),
    rollback: async (request) =>
      runner.track(
        rollbackSession(await contextOf(request), {
          target: request.to,
          stopProcesses: request.stopProcesses,
        }),
      ),
  };
}
