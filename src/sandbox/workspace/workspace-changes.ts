/**
 * The changes of a seeded private copy since it was seeded, read the only way cordon reads an
 * agent-written tree: by a program in a throwaway container, with the sandbox frozen, never by
 * a program on the host (DESIGN.md §10). A backend that can do both offers it (the Docker
 * manager's lease); one that cannot has none, and callers say why no changes can be taken.
 */
export interface WorkspaceChanges {
  /**
   * The changes as one `git apply`-able patch, byte for byte (file contents need not be UTF-8),
   * with forced `a/`/`b/` prefixes and full object ids; empty when nothing changed.
   */
  patch(options?: WorkspaceChangesOptions): Promise<Uint8Array>;
  /**
   * The files changed, each with what it is now (`<mode> <object id>`, or `deleted`): two taken
   * around a command tell which files the command wrote, whatever was changed before it.
   */
  changedFiles(options?: WorkspaceChangesOptions): Promise<Map<string, string>>;
  /**
   * The directories of the copy as it was seeded (each one holding a file then), read from
   * cordon's baseline, not from the copy: with the files a command wrote, they tell which
   * directories the command created.
   */
  baselineDirectories(
    options?: Pick<WorkspaceChangesOptions, "signal" | "timeoutMs">,
  ): Promise<Set<string>>;
}

export interface WorkspaceChangesOptions {
  signal?: AbortSignal | undefined;
  /**
   * Workspace-relative paths left out: whatever happened to them, they read as unchanged
   * (fix-tests leaves out what the test command wrote). A path ending in `/` is a directory and
   * everything under it. Taken literally, never as globs.
   */
  exclude?: readonly string[] | undefined;
  /** Milliseconds the reading may take. Default 10 minutes. */
  timeoutMs?: number | undefined;
}
