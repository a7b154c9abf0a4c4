import { execFile } from "node:child_process";
import { lstat } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";

import { SandboxError } from "../../common/index.js";
import { isErrno } from "./tree-copy.js";

/**
 * Configuration that keeps a repository's own `.git/config` from running anything while cordon
 * lists its files (an agent with `rw` access can write that file): no fsmonitor hook, and the
 * ownership check waived because cordon may run as another user than the repository's owner.
 */
const safeGitConfig = [
  "-c",
  "safe.directory=*",
  "-c",
  "core.fsmonitor=false",
  "-c",
  "core.untrackedCache=false",
];

/** PATH and HOME only: a GIT_DIR or GIT_WORK_TREE of the caller must not redirect the listing. */
function gitEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { LC_ALL: "C" };
  for (const key of ["PATH", "HOME"]) {
    const value = process.env[key];
    if (value !== undefined) env[key] = value;
  }
  return env;
}

const execFileAsync = promisify(execFile);

interface ExecFailure {
  code?: unknown;
  stderr?: unknown;
}

/**
 * The files git would show in `directory`: tracked ones plus untracked ones that are not ignored
 * (`git ls-files -co --exclude-standard`), relative and `/`-separated; undefined when `directory`
 * is not inside a git work tree. Fails when it is a repository but git cannot list it, rather than
 * fall back to a copy that would include ignored files (where secrets like `.env` usually live).
 */
export async function listGitFiles(
  directory: string,
  signal?: AbortSignal,
): Promise<string[] | undefined> {
  try {
    const { stdout } = await execFileAsync(
      "git",
      [...safeGitConfig, "ls-files", "-co", "--exclude-standard", "-z"],
      {
        cwd: directory,
        env: gitEnvironment(),
        maxBuffer: 1024 ** 3,
        encoding: "utf8",
        ...(signal ? { signal } : {}),
      },
    );
    // Unmerged paths appear once per stage.
    return [...new Set(stdout.split("\0").filter((entry) => entry !== ""))];
  } catch (error) {
    const failure = error as ExecFailure;
    const stderr = typeof failure.stderr === "string" ? failure.stderr : "";
    if (failure.code === 128 && /not a git repository/i.test(stderr)) return undefined;
    const hasGitDirectory = await lstat(path.join(directory, ".git")).then(
      () => true,
      () => false,
    );
    if (isErrno(error, "ENOENT") && !hasGitDirectory) return undefined;
    throw new SandboxError(
      `cannot list the files of the git repository ${directory} to seed the private workspace: ${stderr.trim() || String(error)}`,
      {
        fix: "install git on the host, or set sandbox.seed to false",
        cause: error,
      },
    );
  }
}
