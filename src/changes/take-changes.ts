import { FileOperationError, SandboxError } from "../common/index.js";
import { changedFilesSinceBaseline, diffAgainstBaseline } from "../sandbox/index.js";

/** What changes are taken from: a held sandbox with a private workspace it can be frozen over. */
export interface ChangesSource {
  /** Host path of the sandbox's private workspace (the seeded copy). */
  privateWorkspace?: string | undefined;
  /** Runs `fn` with every process of the sandbox paused (see `ProvidedSandbox.freeze`). */
  freeze?: (<T>(fn: () => Promise<T>) => Promise<T>) | undefined;
}

/**
 * The changes made in a seeded private workspace since it was seeded, as one `git apply`-able
 * patch, byte for byte (file contents need not be UTF-8). Empty when nothing changed.
 *
 * Taken once, on the host, with the sandbox paused: no process in it can change a file while git
 * reads the copy, and no patch file ever lives where a sandbox process could swap it. The diff is
 * against cordon's own baseline git dir and never reads the copy's git config (diffAgainstBaseline).
 */
export async function takeChanges(
  source: ChangesSource,
  options: TakeChangesOptions = {},
): Promise<Uint8Array> {
  const { privateWorkspace, freeze } = frozenSource(source);
  return freeze(() =>
    diffAgainstBaseline(privateWorkspace, { signal: options.signal, exclude: options.exclude }),
  );
}

/**
 * The files changed since seeding, each with what it is now (`<mode> <object id>` or `deleted`),
 * taken like takeChanges. Two taken around a command tell which files the command wrote.
 */
export async function takeChangedFiles(
  source: ChangesSource,
  options: { signal?: AbortSignal | undefined } = {},
): Promise<Map<string, string>> {
  const { privateWorkspace, freeze } = frozenSource(source);
  return freeze(() => changedFilesSinceBaseline(privateWorkspace, { signal: options.signal }));
}

export interface TakeChangesOptions {
  signal?: AbortSignal | undefined;
  /** Workspace-relative paths whose changes are left out of the patch (taken literally). */
  exclude?: readonly string[] | undefined;
}

/** The source's private workspace and freeze, or the error that says why it has none. */
function frozenSource(source: ChangesSource): {
  privateWorkspace: string;
  freeze: <T>(fn: () => Promise<T>) => Promise<T>;
} {
  const { privateWorkspace, freeze } = source;
  if (!privateWorkspace) {
    throw new FileOperationError(
      "this sandbox has no private workspace, so it has no changes to take",
      "not_found",
      "/workspace",
      {
        fix: "diff and apply work on seeded private copies (sandbox.workspaceAccess none with seed on); with rw the changes are already in the workspace",
      },
    );
  }
  if (!freeze) {
    throw new SandboxError("this sandbox cannot be paused, so its changes cannot be taken safely", {
      fix: "use the Docker sandbox backend for diff, apply and fix-tests",
    });
  }
  return { privateWorkspace, freeze };
}
