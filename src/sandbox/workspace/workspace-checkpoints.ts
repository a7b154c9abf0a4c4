import { lchown, lstat, mkdir } from "node:fs/promises";
import path from "node:path";

import { SandboxError } from "../../common/index.js";
import type { Owner } from "./owner.js";
import { baselineGitDir } from "./paths.js";

/**
 * The states of a seeded private copy, recorded and put back the only way cordon touches an
 * agent-written tree with a program: in a throwaway container, with the sandbox frozen, never on
 * the host (DESIGN.md §10). A state is a git tree in the copy's checkpoint store; what each one is
 * called, when and why it was taken is cordon's own list on the host (changes/checkpoints.ts).
 */
export interface WorkspaceCheckpoints {
  /**
   * Records the copy as it is (every file the diff would see, deletions and the executable bit;
   * ignored and carried paths left out as in the diff): its tree id, and the files changed since
   * the tree `since` (default: the baseline), each with what it is now (`parseChangedFiles`) —
   * unless `changes` is false.
   */
  record(options?: RecordStateOptions): Promise<RecordedCopy>;
  /**
   * Puts the copy back to the tree `target` with the sandbox frozen: files the target lacks are
   * removed, the others written with its content and mode; ignored and carried paths are left as
   * they are. Returns the state it replaced (recorded first, so a rollback can be undone) and
   * the files that changed.
   */
  restore(target: string, options?: { signal?: AbortSignal | undefined }): Promise<CopyState>;
  /**
   * For each pair of recorded trees, how many paths differ (`from` undefined: the baseline);
   * undefined for a pair whose tree is no longer in the store. Reads only the store, never the
   * copy, and pauses nothing.
   */
  compare(
    pairs: readonly TreePair[],
    options?: { signal?: AbortSignal | undefined },
  ): Promise<(number | undefined)[]>;
}

export interface RecordStateOptions {
  /** A tree id recorded earlier; the changed files are counted from it. Default the baseline. */
  since?: string | undefined;
  /**
   * False: the changed files are not listed (`changed` undefined), which halves the processes a
   * record runs — a turn's, whose count only a listing shows (`compare` then). Default true.
   */
  changes?: boolean | undefined;
  /**
   * A turn's checkpoint, taken inside a run that holds the sandbox (a rollback refuses to run
   * then): it may be recorded without pausing the sandbox when nothing runs in it. Default false:
   * the sandbox is paused while the copy is read.
   */
  unpausedWhenIdle?: boolean | undefined;
  signal?: AbortSignal | undefined;
}

/** A state of the copy and how it differs from another one. */
export interface CopyState {
  /** Its git tree id (hex). */
  tree: string;
  /** Changed paths, each with what it is in the later state (`<mode> <id>` or `deleted`). */
  changed: Map<string, string>;
}

/** Two recorded trees to compare, `from` undefined for the baseline. */
export type TreePair = readonly [from: string | undefined, to: string];

/** A recorded state of the copy; how it differs from `since` only when asked (`changes`). */
export interface RecordedCopy {
  tree: string;
  changed: Map<string, string> | undefined;
}

/**
 * The checkpoint store of a private copy: a directory inside cordon's baseline git dir, so it is
 * removed, renamed and re-seeded with it. Only inspectors write it (as the sandbox user); the
 * agent's container never mounts it.
 */
export function checkpointStoreDir(workspace: string): string {
  return path.join(baselineGitDir(workspace), "checkpoints");
}

/**
 * Makes the checkpoint store and gives it to the sandbox user (inspectors run as that user, never
 * as root). The store's place is cordon's own directory: one that is not a directory (a link put
 * there by anyone) is refused, never followed.
 */
export async function openCheckpointStore(
  workspace: string,
  owner: Owner | undefined,
): Promise<string> {
  const store = checkpointStoreDir(workspace);
  await mkdir(store, { mode: 0o700 }).catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  });
  const found = await lstat(store);
  if (!found.isDirectory()) {
    throw new SandboxError(`the checkpoint store ${store} is not a directory`, {
      fix: `remove it (rm ${store}); cordon makes it again`,
    });
  }
  if (owner && (found.uid !== owner.uid || found.gid !== owner.gid)) {
    await lchown(store, owner.uid, owner.gid);
  }
  return store;
}
