import { constants } from "node:fs";
import { copyFile, lstat, mkdir, rm } from "node:fs/promises";
import path from "node:path";

import type { RunPlan } from "../../policy/index.js";
import { ForkTargetExistsError } from "../../sandbox/index.js";
import { appendSessionNote, sessionFilePath } from "../session/index.js";

/**
 * A fork's conversation (`cordon fork`, unless `--no-transcript`): the parent's transcript copied
 * as it is (the parent's lock is held, so no run appends meanwhile), then a note, so the agent's
 * next turn in the fork knows where its files and history came from. Without a parent transcript
 * (a session only `cordon exec` used) the fork starts with none.
 */

type SessionPlan = Pick<RunPlan, "sessionKey"> & { agent: Pick<RunPlan["agent"], "workspaceId"> };

function transcriptOf(stateDir: string, plan: SessionPlan): string {
  return sessionFilePath(stateDir, plan.sessionKey, plan.agent.workspaceId);
}

/**
 * Refuses a fork onto a session that has a transcript already (an earlier session of that name
 * whose sandbox is gone): the fork would continue a conversation that is not its parent's.
 */
export async function assertNoTranscript(stateDir: string, target: SessionPlan): Promise<void> {
  const existing = await lstat(transcriptOf(stateDir, target)).catch(() => undefined);
  if (!existing) return;
  throw new ForkTargetExistsError(
    `session ${target.sessionKey} has a transcript already: a fork there would continue that conversation`,
    { fix: "fork under another name" },
  );
}

/** What the fork's agent is told, appended to the copied conversation. */
export function forkNote(parent: string, at: Date): string {
  return [
    `[cordon] This session is a fork of session ${parent}, made at ${at.toISOString()}: the conversation above is ${parent}'s, and /workspace started as ${parent}'s copy was then (its changes since the repository included).`,
    `The two go on separately: what you change here does not change ${parent}, and processes that ran there do not run here.`,
  ].join("\n");
}

/**
 * Copies `parent`'s transcript to `fork` (which must have none) and appends the note. Returns
 * whether there was one to copy. A failure leaves no transcript for the fork.
 */
export async function copyTranscriptToFork(options: {
  stateDir: string;
  parent: SessionPlan;
  fork: SessionPlan;
  now?: Date | undefined;
  signal?: AbortSignal | undefined;
}): Promise<boolean> {
  const from = transcriptOf(options.stateDir, options.parent);
  const to = transcriptOf(options.stateDir, options.fork);
  if (!(await lstat(from).catch(() => undefined))?.isFile()) return false;
  await mkdir(path.dirname(to), { recursive: true, mode: 0o700 });
  await copyFile(from, to, constants.COPYFILE_EXCL);
  try {
    await appendSessionNote({
      stateDir: options.stateDir,
      sessionKey: options.fork.sessionKey,
      project: options.fork.agent.workspaceId,
      text: forkNote(options.parent.sessionKey, options.now ?? new Date()),
      signal: options.signal,
    });
  } catch (error) {
    await removeForkTranscript(options.stateDir, options.fork);
    throw error;
  }
  return true;
}

/** Removes a fork's transcript (a fork undone: all or nothing). */
export async function removeForkTranscript(stateDir: string, fork: SessionPlan): Promise<void> {
  await rm(transcriptOf(stateDir, fork), { force: true });
}
