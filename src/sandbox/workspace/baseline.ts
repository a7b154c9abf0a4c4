import { randomUUID } from "node:crypto";
import { constants } from "node:fs";
import { chmod, lchown, lstat, mkdir, open, readdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";

import { FileOperationError, SandboxError } from "../../common/index.js";
import { carryExcludePatterns } from "./carry.js";
import { gitConfigText, readRepositoryFormat, type RepositoryFormat } from "./git-state.js";
import { HostGitError, runHostGit } from "./host-git.js";
import type { Owner } from "./owner.js";
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
export const fastObjects = ["-c", "core.compression=1", "-c", "core.looseCompression=1"];

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
  await prepareBaselineGitDir(workspace, { ...options, gitDir });
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
    const commit = await git(["commit-tree", tree, "-m", baselineMessage]);
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

/**
 * Makes `options.gitDir` the empty baseline git dir of the seed at `workspace` (whose `.git` is
 * read for the format, unless given, and for `info/exclude`): what `recordBaseline` fills, and
 * `StreamedBaseline` (streamed-baseline.ts) for a seed whose files never land in `workspace`.
 */
export async function prepareBaselineGitDir(
  workspace: string,
  options: Pick<RecordBaselineOptions, "format" | "leaveOut"> & { gitDir: string },
): Promise<void> {
  const format =
    options.format ?? (await readRepositoryFormat(path.join(workspace, ".git", "config"), []));
  // In cordon's own git dir, which no container can reach: an agent cannot un-ignore them.
  const leaveOut = carryExcludePatterns(options.leaveOut ?? []).join("\n");
  const exclude = await readExclude(workspace);
  await writeBaselineGitDir(
    options.gitDir,
    format,
    leaveOut === "" ? exclude : Buffer.concat([exclude, Buffer.from(`\n${leaveOut}\n`)]),
  );
}

/** The identity of every baseline commit. */
export const baselineIdentity = identity;

/** The message of every baseline commit. */
export const baselineMessage = "cordon baseline: the seeded copy";

/**
 * How cordon asks for the changes of a copy: what is read from `git add -A`'s pathspec file in
 * the inspector (inspect-changes.sh). Everything, minus `exclude` — workspace-relative paths
 * left at the baseline whatever happened to them (fix-tests leaves out what the test command
 * wrote; `dir/` is a directory and all under it) — NUL-separated, `literal` so a name with `*` or a leading `:` is only ever that
 * name, and on stdin, so no argument-length limit applies.
 */
export function baselinePathspecs(exclude: readonly string[] = []): Uint8Array {
  const pathspecs = [".", ...exclude.map((file) => `:(top,exclude,literal)${file}`)];
  return Buffer.from(pathspecs.join("\0"));
}

/**
 * The files changed since seeding, each with what it is now (`<mode> <object id>`, or
 * `deleted`), from `git diff --cached --raw -z --no-renames` as the inspector prints it. Two of
 * these taken around a command tell which files the command wrote. Strict: an entry that is not
 * git's shape ends the parse with an error, never a guess.
 */
export function parseChangedFiles(raw: Uint8Array): Map<string, string> {
  // With -z each entry is `:<old mode> <new mode> <old id> <new id> <status>` NUL `<path>` NUL,
  // the path verbatim (no quoting), one path per entry since renames are off.
  const fields = Buffer.from(raw).toString("utf8").split("\0");
  const files = new Map<string, string>();
  for (let at = 0; at + 1 < fields.length; at += 2) {
    const entry = rawEntry.exec(fields[at] ?? "");
    const file = fields[at + 1];
    if (!entry || file === undefined || file === "") {
      throw new SandboxError("the list of changed files read from the copy is malformed", {
        fix: "run the command again; if it persists, report it with the output of `cordon exec -- git status`",
      });
    }
    const [, newMode, newId, status] = entry;
    files.set(file, status === "D" ? "deleted" : `${newMode} ${newId}`);
  }
  return files;
}

/**
 * The seeded copy's directories, from `git ls-tree -r -d -z --name-only` over cordon's baseline
 * as the inspector prints it. Strict like parseChangedFiles: an empty, absolute or `..` entry
 * ends the parse with an error.
 */
export function parseBaselineDirectories(raw: Uint8Array): Set<string> {
  const text = Buffer.from(raw).toString("utf8");
  const entries = text === "" ? [] : text.replace(/\0$/, "").split("\0");
  for (const entry of entries) {
    if (entry === "" || entry.startsWith("/") || entry.split("/").some(isNotAName)) {
      throw new SandboxError("the list of directories read from the baseline is malformed", {
        fix: "run the command again; if it persists, report it with `git --version` of the sandbox image",
      });
    }
  }
  return new Set(entries);
}

function isNotAName(part: string): boolean {
  return part === "" || part === "." || part === "..";
}

const rawEntry = /^:[0-7]{6} ([0-7]{6}) [0-9a-f]{40,64} ([0-9a-f]{40,64}) ([ADMTUX])$/;

/**
 * Fails, naming the fix, when a private workspace has no cordon baseline (seeded by an older
 * cordon, or not seeded): its changes cannot be told apart.
 */
export async function assertHasBaseline(privateWorkspace: string): Promise<void> {
  const found = await lstat(path.join(baselineGitDir(privateWorkspace), baselineRef)).catch(
    () => undefined,
  );
  if (found?.isFile()) return;
  throw new FileOperationError(
    `the private workspace ${privateWorkspace} has no cordon baseline, so its changes cannot be told apart`,
    "not_found",
    privateWorkspace,
    {
      fix: "diff and apply work on seeded private copies (sandbox.workspaceAccess none or ro, with seed on); a copy seeded by an older cordon has its baseline inside the sandbox: remove it with `cordon sandbox rm <name>` and run again",
    },
  );
}

/**
 * Gives the baseline git dir of a private workspace to the sandbox user, so the inspector (which
 * runs as that user, never as root) can read it. No container of the agent's ever mounts it, and
 * it stays mode 0700 beside the copy, in cordon's state directory. Links are never followed (the
 * dir is cordon's own: git writes no links into it).
 */
export async function openBaselineTo(privateWorkspace: string, owner: Owner): Promise<void> {
  const gitDir = baselineGitDir(privateWorkspace);
  const top = await lstat(gitDir);
  if (top.uid === owner.uid && top.gid === owner.gid) return;
  const walk = async (directory: string): Promise<void> => {
    for (const entry of await readdir(directory, { withFileTypes: true })) {
      const entryPath = path.join(directory, entry.name);
      await lchown(entryPath, owner.uid, owner.gid);
      if (entry.isDirectory()) await walk(entryPath);
    }
  };
  await walk(gitDir);
  // The top last: it is what says the whole dir has been given.
  await lchown(gitDir, owner.uid, owner.gid);
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
