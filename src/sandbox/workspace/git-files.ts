import { SandboxError } from "../../common/index.js";
import { HostGitError, runHostGit } from "./host-git.js";
import { isErrno } from "./tree-copy.js";

export interface GitListing {
  /**
   * A git dir cordon wrote (the sanitized copy's `.git`, or a listing scratch dir): never the
   * repository's own, whose config an `rw` agent could have written.
   */
  gitDir: string;
  /** The repository's work tree (the agent workspace, or the repository's top above it). */
  workTree: string;
  /** The directory whose files are listed (inside `workTree`); paths come back relative to it. */
  directory: string;
  /** Only the files git tracks (default: tracked and untracked, not ignored). */
  trackedOnly?: boolean | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * The files git would show in `directory`: tracked ones plus untracked ones that are not ignored
 * (`git ls-files -co --exclude-standard`), relative and `/`-separated. The user's global config
 * is read (their `core.excludesFile` is theirs), the repository's is not. Fails when git cannot
 * list them, rather than fall back to a copy that would include ignored files (where secrets like
 * `.env` usually live).
 */
export async function listGitFiles(listing: GitListing): Promise<string[]> {
  try {
    const which = listing.trackedOnly ? ["-c"] : ["-co", "--exclude-standard"];
    const stdout = await runHostGit(["ls-files", ...which, "-z"], {
      gitDir: listing.gitDir,
      workTree: listing.workTree,
      cwd: listing.directory,
      userConfig: true,
      maxBuffer: 1024 ** 3,
      signal: listing.signal,
    });
    // Unmerged paths appear once per stage.
    return [
      ...new Set(
        stdout
          .toString("utf8")
          .split("\0")
          .filter((entry) => entry !== ""),
      ),
    ];
  } catch (error) {
    const said = error instanceof HostGitError ? error.stderr : "";
    const missingGit = error instanceof HostGitError && isErrno(error.cause, "ENOENT");
    throw new SandboxError(
      `cannot list the files of the git repository ${listing.workTree} to seed the private workspace: ${said || String(error)}`,
      {
        fix: missingGit
          ? "install git on the host, or set sandbox.seed to false"
          : "check the repository with `git status`, or set sandbox.seed to false",
        cause: error,
      },
    );
  }
}
