import { randomUUID } from "node:crypto";
import { constants } from "node:fs";
import { chmod, lstat, mkdir, open, rm, writeFile } from "node:fs/promises";
import path from "node:path";

import { FileOperationError, SandboxError } from "../../common/index.js";
import { carryExcludePatterns } from "./carry.js";
import { gitConfigText, readRepositoryFormat, type RepositoryFormat } from "./git-state.js";
import { HostGitError, defaultGitOutputBytes, runHostGit } from "./host-git.js";
import { baselineGitDir } from "./paths.js";
import { isErrno } from "./tree-copy.js";

/** The ref that records the seeded state of a private workspace; diffs are taken against it. */
export const baselineRef = "refs/cordon/baseline";

/**
 * Beats every `.gitattributes` in the work tree (info/attributes has the highest precedence), so
 * no file can name a filter (code on the host) or have its bytes changed on the way in.
 */
const baselineAttributes = "* -filter -text -eol -ident -working-tree-encoding\n";

/**
 * Loose objects at the fastest zlib level: the baseline is written once per seed, read by diffs
 * on the same machine, and never sent anywhere.
 */
const fastObjects = ["-c", "core.compression=1", "-c", "core.looseCompression=1"];

const identity = {
  GIT_AUTHOR_NAME: "cordon",
  GIT_AUTHOR_EMAIL: "cordon@localhost",
  GIT_COMMITTER_NAME: "cordon",
  GIT_COMMITTER_EMAIL: "cordon@localhost",
};

export interface RecordBaselineOptions {
  /** The git dir to create for it. Default `baselineGitDir(workspace)`. */
  gitDir?: string | undefined;
  /**
   * The object format (same as the user's repository, so patches carry hashes it knows).
   * Default: read from the workspace's `.git/config` — call it before any agent touched it.
   */
  format?: RepositoryFormat | undefined;
  /**
   * Workspace-relative paths left out of the baseline and of every later diff, whatever the
   * copy's own ignore rules say (carried dependencies: `spec.carry`).
   */
  leaveOut?: readonly string[] | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * Records the current content of a freshly seeded private workspace as `refs/cordon/baseline` in
 * a git dir of cordon's own beside it (never in the copy's `.git`, which the agent owns), so later
 * changes can be taken as one patch. Tracked and untracked (not ignored) files are included; the
 * copy's own `info/exclude` is carried over so what the user ignores stays out of diffs. The copy
 * must not be reachable by any container yet (seeding builds it in a closed directory).
 */
export async function recordBaseline(
  workspace: string,
  options: RecordBaselineOptions = {},
): Promise<string> {
  const gitDir = options.gitDir ?? baselineGitDir(workspace);
  const format =
    options.format ?? (await readRepositoryFormat(path.join(workspace, ".git", "config"), []));
  // In cordon's own git dir, which no container can reach: an agent cannot un-ignore them.
  const leaveOut = carryExcludePatterns(options.leaveOut ?? []).join("\n");
  const exclude = await readExclude(workspace);
  await writeBaselineGitDir(
    gitDir,
    format,
    leaveOut === "" ? exclude : Buffer.concat([exclude, Buffer.from(`\n${leaveOut}\n`)]),
  );
  const index = path.join(gitDir, `index-${randomUUID()}`);
  const git = async (args: string[]): Promise<string> =>
    (
      await runHostGit([...fastObjects, ...args], {
        gitDir,
        workTree: workspace,
        env: { ...identity, GIT_INDEX_FILE: index },
        signal: options.signal,
      })
    )
      .toString("utf8")
      .trim();
  try {
    // Every blob above a 1-byte "big file" threshold is streamed into one pack instead of a loose
    // file each: a 600-file seed writes 2 files, not 600, where creating files is what costs.
    await git(["-c", "core.bigFileThreshold=1", "add", "-A", "."]);
    const tree = await git(["write-tree"]);
    const commit = await git(["commit-tree", tree, "-m", "cordon baseline: the seeded copy"]);
    await git(["update-ref", baselineRef, commit]);
    return commit;
  } catch (error) {
    if (!(error instanceof HostGitError)) throw error;
    throw new SandboxError(`cannot record the baseline of ${workspace}: ${error.message}`, {
      fix: "check that git works on the host (`git --version`), or set sandbox.seed to false",
      cause: error,
    });
  } finally {
    await rm(index, { force: true });
  }
}

export interface BaselineDiffOptions {
  signal?: AbortSignal | undefined;
  /** Milliseconds each git step may take. Default 10 minutes. */
  timeoutMs?: number | undefined;
  /**
   * Workspace-relative file paths left out: whatever happened to them, they read as unchanged
   * (fix-tests leaves out what the test command wrote). Taken literally, never as globs.
   */
  exclude?: readonly string[] | undefined;
}

/**
 * The changes made in a seeded private workspace since it was seeded, as one `git apply`-able
 * patch, byte for byte (file contents need not be UTF-8); empty when nothing changed. Host git,
 * against cordon's baseline git dir, with a fresh private index and the work tree as plain data:
 * no config but cordon's, no hooks, filters, textconv or external diff, prefixes forced to
 * `a/`/`b/` whatever anyone configured. The copy's `.git` is never read (git skips `.git` in a
 * work tree) and a nested repository is recorded as a gitlink from its HEAD only.
 *
 * Contract: the caller guarantees that no container process runs while this reads the copy (the
 * sandbox is paused or stopped), so what is diffed is one state, not a moving target.
 */
export async function diffAgainstBaseline(
  privateWorkspace: string,
  options: BaselineDiffOptions = {},
): Promise<Uint8Array> {
  return withWorkTreeIndex(privateWorkspace, options, (git) =>
    git([
      "-c",
      "diff.noprefix=false",
      "-c",
      "diff.mnemonicPrefix=false",
      "-c",
      "core.quotePath=false",
      "diff",
      "--cached",
      "--binary",
      "--full-index",
      "--no-color",
      "--no-ext-diff",
      "--no-textconv",
      "--src-prefix=a/",
      "--dst-prefix=b/",
      baselineRef,
    ]),
  );
}

/**
 * The files changed in a seeded private workspace since it was seeded, each with what it is now
 * (`<mode> <object id>`, or `deleted`): two of these taken around a command tell which files the
 * command wrote, whatever was changed before it. Same git, same contract as diffAgainstBaseline.
 */
export async function changedFilesSinceBaseline(
  privateWorkspace: string,
  options: BaselineDiffOptions = {},
): Promise<Map<string, string>> {
  const raw = await withWorkTreeIndex(privateWorkspace, options, (git) =>
    git(["diff", "--cached", "--raw", "-z", "--no-abbrev", "--no-renames", baselineRef]),
  );
  // With -z each entry is `:<old mode> <new mode> <old id> <new id> <status>` NUL `<path>` NUL,
  // the path verbatim (no quoting), one path per entry since renames are off.
  const fields = Buffer.from(raw).toString("utf8").split("\0");
  const files = new Map<string, string>();
  for (let at = 0; at + 1 < fields.length; at += 2) {
    const [, newMode, , newId, status] = (fields[at] ?? "").split(" ");
    const file = fields[at + 1];
    if (file === undefined || newMode === undefined || newId === undefined) continue;
    files.set(file, status === "D" ? "deleted" : `${newMode} ${newId}`);
  }
  return files;
}

type ScratchGit = (args: string[], maxBuffer?: number) => Promise<Buffer>;

/**
 * Runs `fn` with git bound to a scratch index holding the work tree as it is now (minus
 * `options.exclude`, left at the baseline), then removes the scratch index and objects.
 */
async function withWorkTreeIndex<T>(
  privateWorkspace: string,
  options: BaselineDiffOptions,
  fn: (git: ScratchGit) => Promise<T>,
): Promise<T> {
  const gitDir = baselineGitDir(privateWorkspace);
  const found = await lstat(path.join(gitDir, baselineRef)).catch(() => undefined);
  if (!found?.isFile()) {
    throw new FileOperationError(
      `the private workspace ${privateWorkspace} has no cordon baseline, so its changes cannot be told apart`,
      "not_found",
      privateWorkspace,
      {
        fix: "diff and apply work on seeded private copies (sandbox.workspaceAccess none or ro, with seed on); a copy seeded by an older cordon has its baseline inside the sandbox: remove it with `cordon sandbox rm <name>` and run again",
      },
    );
  }
  const scratch = `diff-${randomUUID()}`;
  const index = path.join(gitDir, `${scratch}.index`);
  // What `add` writes (the agent's files) goes to a scratch object dir deleted afterwards: the
  // baseline never grows with what the agent wrote, so repeated diffs cannot fill the host's
  // disk beyond the workspace's own size, and then only while one runs.
  const objects = path.join(gitDir, `${scratch}.objects`);
  const git = (args: string[], maxBuffer?: number, stdin?: Uint8Array): Promise<Buffer> =>
    runHostGit([...fastObjects, ...args], {
      gitDir,
      workTree: privateWorkspace,
      env: {
        ...identity,
        GIT_INDEX_FILE: index,
        GIT_OBJECT_DIRECTORY: objects,
        GIT_ALTERNATE_OBJECT_DIRECTORIES: path.join(gitDir, "objects"),
      },
      maxBuffer,
      stdin,
      timeoutMs: options.timeoutMs,
      signal: options.signal,
    });
  await mkdir(objects, { mode: 0o700 });
  try {
    await git(["read-tree", baselineRef]);
    // Pathspecs on stdin (no argument-length limit), NUL-separated, `literal` so a name with `*`
    // or a leading `:` is only ever that name.
    const pathspecs = [
      ".",
      ...(options.exclude ?? []).map((file) => `:(top,exclude,literal)${file}`),
    ];
    await git(
      ["add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"],
      undefined,
      Buffer.from(pathspecs.join("\0")),
    );
    return await fn((args, maxBuffer) => git(args, maxBuffer));
  } catch (error) {
    if (error instanceof HostGitError && error.outputTooLarge) {
      throw new FileOperationError(
        `the changes in ${privateWorkspace} are bigger than ${defaultGitOutputBytes / 1024 / 1024} MiB as a patch`,
        "too_large",
        privateWorkspace,
        {
          fix: "remove large generated files from the workspace (cordon exec -- git status shows them), or copy them out by hand",
          cause: error,
        },
      );
    }
    if (error instanceof HostGitError) {
      throw new SandboxError(`cannot take the changes of ${privateWorkspace}: ${error.message}`, {
        fix: "look at the workspace with `cordon exec -- git status` and remove what blocks git (`cordon exec -- find . -type p` lists FIFOs), or discard it with `cordon sandbox rm <name>`",
        cause: error,
      });
    }
    throw error;
  } finally {
    await rm(index, { force: true });
    await rm(objects, { recursive: true, force: true });
  }
}

/** The copy's `info/exclude` (the user's, copied at seeding), never through a link. */
async function readExclude(workspace: string): Promise<Buffer> {
  const file = path.join(workspace, ".git", "info", "exclude");
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if (isErrno(error, "ENOENT") || isErrno(error, "ELOOP") || isErrno(error, "ENOTDIR")) {
      return Buffer.alloc(0);
    }
    throw error;
  }
  try {
    const stats = await handle.stat();
    return stats.isFile() ? await handle.readFile() : Buffer.alloc(0);
  } finally {
    await handle.close();
  }
}

/** A git dir only cordon (root, or the invoking user) can enter: mode 0700, cordon's config. */
async function writeBaselineGitDir(
  gitDir: string,
  format: RepositoryFormat,
  exclude: Buffer,
): Promise<void> {
  // Recording again replaces the old baseline.
  await rm(gitDir, { recursive: true, force: true });
  await mkdir(gitDir, { mode: 0o700 });
  await chmod(gitDir, 0o700);
  for (const directory of ["objects", "refs", "info"]) {
    await mkdir(path.join(gitDir, directory), { mode: 0o700 });
  }
  await writeFile(path.join(gitDir, "HEAD"), `ref: ${baselineRef}\n`, { flag: "wx" });
  await writeFile(path.join(gitDir, "config"), gitConfigText(format), { flag: "wx" });
  await writeFile(path.join(gitDir, "info", "attributes"), baselineAttributes, { flag: "wx" });
  await writeFile(path.join(gitDir, "info", "exclude"), exclude, { flag: "wx" });
}
