import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * Every attribute through which git runs or converts content: with these unset in the git dir's
 * own `info/attributes` (which outranks every `.gitattributes` in the tree), no clean or smudge
 * filter, eol conversion, ident expansion or re-encoding touches a file.
 */
const neutralAttributes = "* -filter -text -ident -working-tree-encoding\n";

/** git runs on the real workspace; its stdout and stderr. */
export type IsolatedGit = (args: readonly string[]) => Promise<{ stdout: string; stderr: string }>;

/**
 * Runs `fn` with a git bound to `workTree` but to a fresh, empty git dir cordon made, never the
 * repository's own `.git`: the repository's config (filters, fsmonitor, includes, aliases), hooks
 * and attributes are never read, so nothing the repository or an agent wrote runs on the host.
 * System and global config are off too, and the environment holds no GIT_* of the caller's.
 */
export async function withIsolatedGit<T>(
  workTree: string,
  fn: (git: IsolatedGit, scratch: string) => Promise<T>,
): Promise<T> {
  const scratch = await mkdtemp(path.join(os.tmpdir(), "cordon-git-"));
  try {
    const env = {
      PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
      // English messages: conflicts are read from git's stderr.
      LC_ALL: "C",
      HOME: scratch,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_ATTR_NOSYSTEM: "1",
      GIT_CEILING_DIRECTORIES: path.dirname(path.resolve(workTree)),
      GIT_TERMINAL_PROMPT: "0",
    };
    const gitDir = path.join(scratch, "git");
    // --template= : no sample hooks, no info/exclude from the system's template directory.
    await run("git", ["init", "--bare", "--quiet", "--template=", gitDir], { env, cwd: scratch });
    await mkdir(path.join(gitDir, "info"), { recursive: true });
    await writeFile(path.join(gitDir, "info", "attributes"), neutralAttributes);
    const git: IsolatedGit = (args) =>
      run(
        "git",
        [
          `--git-dir=${gitDir}`,
          `--work-tree=${workTree}`,
          "-c",
          "core.bare=false",
          "-c",
          "core.hooksPath=/dev/null",
          "-c",
          "core.fsmonitor=false",
          // Refuse .git spelt for HFS+ or NTFS, whatever this host's filesystem is.
          "-c",
          "core.protectHFS=true",
          "-c",
          "core.protectNTFS=true",
          ...args,
        ],
        { cwd: workTree, env, maxBuffer: 16 * 1024 * 1024 },
      );
    return await fn(git, scratch);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
