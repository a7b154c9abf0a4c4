import { randomUUID } from "node:crypto";

import { ConfigError, messageOf } from "../../common/index.js";
import type { RunPlan } from "../../policy/index.js";
import { ForkTargetExistsError, type SandboxLease } from "../../sandbox/index.js";
import {
  SessionBusyError,
  acquireSessionLock,
  sandboxesHeld,
  sandboxesHeldByRuns,
} from "../session/index.js";
import type { PlanRequest } from "../create-runner.js";
import {
  assertNoTranscript,
  copyTranscriptToFork,
  removeForkTranscript,
} from "./fork-transcript.js";
import type { ProvideSandboxOptions, SandboxProvider } from "./sandbox-provider.js";
import { seededCopyOf } from "./session-checkpoints.js";

/**
 * Forks of a session's sandbox (`Runner.forkSandbox`, `cordon fork`): new sessions whose private
 * copies start as the parent's is now. The plan says which copies, the sandbox backend makes the
 * fork (`SandboxProvider.fork`: a throwaway container copies the files, the parent frozen).
 */

/**
 * A fork's session name: letters, digits, `.`, `_`, `-`, starting with a letter or digit, at most
 * 64 characters — as a checkpoint's, so no path (`../x`), option (`--x`), space or ref can be one.
 */
const forkNamePattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Throws a usage error (exit 2) unless `name` can name a fork's session. */
export function assertForkName(name: string): void {
  if (forkNamePattern.test(name) && !name.includes("..")) return;
  throw new ConfigError(
    `${JSON.stringify(name)} cannot name a fork: use letters, digits, ".", "_" and "-", starting with a letter or digit (at most 64)`,
    { fix: "choose a name such as try-2 or fix-parser-b" },
  );
}

/** What a fork is made from: the parent session's request, the fork's session name. */
export type ForkSandboxRequest = PlanRequest & {
  /** The new session's name (see `assertForkName`); it must have no sandbox yet. */
  as: string;
  signal?: AbortSignal | undefined;
  onProgress?: ProvideSandboxOptions["onProgress"];
  readsChanges?: ProvideSandboxOptions["readsChanges"];
};

/**
 * Forks the sandbox of `request`'s session into session `request.as` and holds the fork: its
 * plan (the parent's request with the fork's session) and lease. The parent's copy must exist
 * (a usage error otherwise); a run may be using it. No session lock is taken here.
 */
export async function forkSessionSandbox(
  runner: { plan: (request: PlanRequest) => Promise<RunPlan>; sandboxes: SandboxProvider },
  request: ForkSandboxRequest,
): Promise<{ plan: RunPlan; lease: SandboxLease }> {
  assertForkName(request.as);
  const { as, signal, onProgress, readsChanges, ...parentRequest } = request;
  const source = await runner.plan(parentRequest);
  await seededCopyOf(source);
  const target = await runner.plan({ ...parentRequest, sessionKey: as });
  assertNotItself(source, target);
  if (!runner.sandboxes.fork) {
    throw new ConfigError("this sandbox backend cannot fork a sandbox", {
      fix: "use the Docker sandbox backend (the default)",
    });
  }
  const lease = await runner.sandboxes.fork(source, target, { signal, onProgress, readsChanges });
  for (const warning of lease.warnings ?? []) {
    onProgress?.({ phase: "warning", message: `warning: ${warning}` });
  }
  return { plan: target, lease };
}

/**
 * The progress phase of a fork a failed `forkSession` kept because something started using it:
 * its user is told, and whoever says "the forks were removed" must leave it out.
 */
export const forkKeptPhase = "fork-kept";

/** At most this many forks in one call (`--count`): each is a container and a full copy. */
export const maxForkCount = 32;

/** What `cordon fork` / `Runner.fork` is asked for. */
export type ForkSessionRequest = PlanRequest & {
  /** The fork's session name, or with `count` the stem of `<as>-1` … `<as>-<count>`. */
  as: string;
  /** How many forks (1 to 32); unset: one, named `as` itself. */
  count?: number | undefined;
  /**
   * Whether each fork starts with the parent's conversation (its transcript copied, and a note
   * saying it is a fork). Default true; false: an empty transcript, as a new session.
   */
  transcript?: boolean | undefined;
  signal?: AbortSignal | undefined;
  onProgress?: ProvideSandboxOptions["onProgress"];
};

/** One fork a `fork` made. */
export interface SessionFork {
  /** The name it was asked for (`--as`, or `<as>-<n>`). */
  name: string;
  /** Its full session key (`--session` takes either). */
  sessionKey: string;
  /** Its sandbox's container. */
  sandbox: string;
  /** Host path of its private copy. */
  privateWorkspace: string;
  /** Whether it starts with the parent's conversation (false: there was none, or not asked). */
  transcript: boolean;
}

/** The sessions a fork request names: `as` alone, or `as-1` … `as-<count>`. */
export function forkNames(as: string, count: number | undefined): string[] {
  if (count === undefined) {
    assertForkName(as);
    return [as];
  }
  if (!Number.isInteger(count) || count < 1 || count > maxForkCount) {
    throw new ConfigError(`--count takes a whole number from 1 to ${maxForkCount}, not ${count}`, {
      fix: "--count 3 makes <name>-1, <name>-2 and <name>-3",
    });
  }
  const names = Array.from({ length: count }, (_, index) => `${as}-${index + 1}`);
  names.forEach(assertForkName);
  return names;
}

/**
 * Forks a session into new ones (`cordon fork`): refused while a run holds the session or its
 * sandbox (exit 3, naming the run: its copy is mid-turn and the agent writing), and the
 * session's lock is held meanwhile so no run starts; each fork's session is locked while it is
 * made. All or nothing: when one fork fails, those made before it are removed, transcripts too —
 * except one that something started using meanwhile (a run, a port forward, an exec), which is
 * kept and reported (a `warning` progress line) rather than pulled from under its user.
 * The forks' sandboxes are released (their containers stay, as after a run); each starts with
 * the parent's conversation unless `transcript` is false (fork-transcript.ts).
 */
export async function forkSession(
  runner: {
    plan: (request: PlanRequest) => Promise<RunPlan>;
    sandboxes: SandboxProvider;
    stateDir: string;
  },
  request: ForkSessionRequest,
): Promise<SessionFork[]> {
  const { as, count, transcript = true, signal, onProgress, ...parentRequest } = request;
  const names = forkNames(as, count);
  const source = await runner.plan(parentRequest);
  await seededCopyOf(source);
  const held = (await sandboxesHeldByRuns(runner.stateDir)).holderOf({
    name: source.sandbox.spec?.containerName ?? "",
    session: source.sessionKey,
  });
  if (held) throw busy(source, `its sandbox is ${held}`);
  const lockOf = (plan: RunPlan, role: "parent" | "fork") =>
    acquireSessionLock({
      stateDir: runner.stateDir,
      sessionKey: plan.sessionKey,
      project: plan.agent.workspaceId,
      runId: `fork-${randomUUID()}`,
      agentId: plan.agent.id,
      workspace: plan.agent.workspace,
      wait: false,
      signal,
    }).catch((error: unknown) => {
      if (!(error instanceof SessionBusyError)) throw error;
      throw role === "parent"
        ? busy(plan, error.message)
        : new ForkTargetExistsError(`session ${plan.sessionKey} is in use: ${error.message}`, {
            fix: "fork under another name",
          });
    });
  const parentLock = await lockOf(source, "parent");
  const made: { fork: SessionFork; plan: RunPlan }[] = [];
  try {
    for (const name of names) {
      const target = await runner.plan({ ...parentRequest, sessionKey: name });
      // Before its lock: the parent's is this command's own, and "in use" would blame a run.
      assertNotItself(source, target);
      const lock = await lockOf(target, "fork");
      try {
        await assertNoTranscript(runner.stateDir, target);
        const forked = await forkSessionSandbox(runner, {
          ...parentRequest,
          as: name,
          signal,
          onProgress,
        });
        await forked.lease.release();
        const fork = {
          name,
          sessionKey: forked.plan.sessionKey,
          sandbox: forked.plan.sandbox.spec?.containerName ?? "",
          privateWorkspace: forked.lease.privateWorkspace ?? "",
          transcript: false,
        };
        made.push({ plan: forked.plan, fork });
        if (transcript) {
          fork.transcript = await copyTranscriptToFork({
            stateDir: runner.stateDir,
            parent: source,
            fork: forked.plan,
            signal,
          });
        }
      } finally {
        await lock.release();
      }
    }
  } catch (error) {
    // All or nothing: the forks made before this one go too — but one that something started
    // using meanwhile (each fork's lock is released once it is made) is its user's now: kept.
    for (const { plan, fork } of made) {
      const inUse = await undoFork(runner, plan, lockOf).catch((undo: unknown) => messageOf(undo));
      if (inUse !== undefined) {
        onProgress?.({
          phase: forkKeptPhase,
          message: `warning: fork ${fork.name} was kept, not removed: ${inUse}; remove it when done with \`cordon sandbox rm ${fork.sandbox}\``,
        });
      }
    }
    throw error;
  } finally {
    await parentLock.release();
  }
  return made.map(({ fork }) => fork);
}

/**
 * Removes a fork a failed `forkSession` made (sandbox and transcript), unless it is in use:
 * a run holds its session or sandbox, a port forward its sandbox, or commands run in it (a
 * `cordon exec`). Its session's lock is taken first, so no run starts on it while it goes.
 * Returns why it was kept, or undefined once it is removed.
 */
async function undoFork(
  runner: { sandboxes: SandboxProvider; stateDir: string },
  plan: RunPlan,
  lockOf: (plan: RunPlan, role: "fork") => Promise<{ release: () => Promise<void> }>,
): Promise<string | undefined> {
  // Asked before the lock is ours: once it is, this process holds the session itself.
  const held = (await sandboxesHeld(runner.stateDir)).holderOf({
    name: plan.sandbox.spec?.containerName ?? "",
    session: plan.sessionKey,
  });
  if (held) return `its sandbox is ${held}`;
  let lock: { release: () => Promise<void> };
  try {
    lock = await lockOf(plan, "fork");
  } catch (error) {
    return messageOf(error);
  }
  try {
    const [running] = (await runner.sandboxes.commandsIn?.(plan)) ?? [];
    if (running !== undefined) return `commands run in it (${running.slice(0, 60)})`;
    await runner.sandboxes.discard?.(plan);
    await removeForkTranscript(runner.stateDir, plan);
    return undefined;
  } finally {
    await lock.release();
  }
}

/** A fork's name must be a new session, not the one being forked. */
function assertNotItself(source: RunPlan, target: RunPlan): void {
  if (target.sessionKey !== source.sessionKey) return;
  throw new ForkTargetExistsError(`cannot fork session ${source.sessionKey} into itself`, {
    fix: "name a new session with --as",
  });
}

function busy(plan: RunPlan, why: string): SessionBusyError {
  return new SessionBusyError(`cannot fork session ${plan.sessionKey}: ${why}`, {
    fix: `wait for that run to end (\`cordon ps\` lists it, \`cordon logs -f --session ${plan.sessionKey}\` follows it) or stop it, then fork`,
  });
}
