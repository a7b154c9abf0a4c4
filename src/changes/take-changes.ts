import { FileOperationError, SandboxError } from "../common/index.js";
import type { WorkspaceChanges } from "../sandbox/index.js";

/** What changes are taken from: a held sandbox whose private workspace's changes can be read. */
export interface ChangesSource {
  /** Host path of the sandbox's private workspace (the seeded copy). */
  privateWorkspace?: string | undefined;
  /** The backend's reader of those changes (see `ProvidedSandbox.changes`). */
  changes?: WorkspaceChanges | undefined;
}

/**
 * The changes made in a seeded private workspace since it was seeded, as one `git apply`-able
 * patch, byte for byte (file contents need not be UTF-8). Empty when nothing changed.
 *
 * Read by a throwaway inspector container with the sandbox paused (never by a program on the
 * host: DESIGN.md §10): no process in the sandbox can change a file while it is read, and no
 * patch file ever lives where a sandbox process could swap it.
 */
export async function takeChanges(
  source: ChangesSource,
  options: TakeChangesOptions = {},
): Promise<Uint8Array> {
  return readerOf(source).patch({ signal: options.signal, exclude: options.exclude });
}

/**
 * The files changed since seeding, each with what it is now (`<mode> <object id>` or `deleted`),
 * taken like takeChanges. Two taken around a command tell which files the command wrote.
 */
export async function takeChangedFiles(
  source: ChangesSource,
  options: { signal?: AbortSignal | undefined } = {},
): Promise<Map<string, string>> {
  return readerOf(source).changedFiles({ signal: options.signal });
}

/**
 * The directories of the copy as it was seeded, read by an inspector from cordon's baseline (see
 * `WorkspaceChanges.baselineDirectories`).
 */
export async function takeBaselineDirectories(
  source: ChangesSource,
  options: { signal?: AbortSignal | undefined } = {},
): Promise<Set<string>> {
  return readerOf(source).baselineDirectories({ signal: options.signal });
}

export interface TakeChangesOptions {
  signal?: AbortSignal | undefined;
  /**
   * Workspace-relative paths whose changes are left out of the patch (taken literally; `dir/` is
   * a directory and everything under it).
   */
  exclude?: readonly string[] | undefined;
}

/** The source's reader of changes, or the error that says why it has none. */
function readerOf(source: ChangesSource): WorkspaceChanges {
  if (!source.privateWorkspace) {
    throw new FileOperationError(
      "this sandbox has no private workspace, so it has no changes to take",
      "not_found",
      "/workspace",
      {
        fix: "diff and apply work on seeded private copies (sandbox.workspaceAccess none with seed on); with rw the changes are already in the workspace",
      },
    );
  }
  if (!source.changes) {
    throw new SandboxError("this sandbox cannot have its changes read safely", {
      fix: "use the Docker sandbox backend for diff, apply and fix-tests: it pauses the sandbox and reads the copy in a throwaway container",
    });
  }
  return source.changes;
}
