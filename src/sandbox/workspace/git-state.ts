import { constants, type Dirent } from "node:fs";
import { chmod, lchown, lstat, mkdir, open, readdir, realpath, writeFile } from "node:fs/promises";
import path from "node:path";

import { runHostGit } from "./host-git.js";
import { packLooseObjects, type LooseObject } from "./loose-object-pack.js";
import type { Owner } from "./owner.js";
import { TreeCopier, isErrno, type CopySummary } from "./tree-copy.js";

/**
 * What a git dir needs to be read: its format version and `extensions.*` (`objectformat=sha256`,
 * `refstorage`…). The only part of a repository's config cordon ever carries over.
 */
export interface RepositoryFormat {
  version: 0 | 1;
  /** Lower-case extension names with their values, in file order. */
  extensions: [string, string][];
}

export const defaultRepositoryFormat: RepositoryFormat = { version: 0, extensions: [] };

/** Where the repository of a workspace is, found without asking git (which would read its config). */
export type SourceRepository =
  /** `<workspace>/.git` is a directory: it is copied, sanitized, into the private workspace. */
  | { kind: "own"; gitDir: string }
  /**
   * `.git` is a file (linked worktree, submodule) or the repository is a directory above the
   * workspace: only listed from, never copied.
   */
  | { kind: "elsewhere"; workTree: string; gitDir: string; commonDir: string };

/** Biggest config, gitfile or commondir file read. */
const maxStateFileBytes = 1024 * 1024;

/** Config writes `extensions.worktreeConfig` would make git read `config.worktree`, which is never copied. */
const droppedExtensions = new Set(["worktreeconfig"]);

/** Extension values are names and hash names; anything else is not carried over. */
const plainValue = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/**
 * The repository `sourceRoot` belongs to, found the way git finds it (a `.git` directory with a
 * HEAD, or a `gitdir:` file, in the workspace or a directory above), without running git.
 */
export async function findRepository(sourceRoot: string): Promise<SourceRepository | undefined> {
  for (let directory = sourceRoot; ; directory = path.dirname(directory)) {
    const dotGit = path.join(directory, ".git");
    const stats = await lstat(dotGit).catch(() => undefined);
    if (stats?.isDirectory() && (await isGitDir(dotGit))) {
      if (directory === sourceRoot) return { kind: "own", gitDir: dotGit };
      return { kind: "elsewhere", workTree: directory, gitDir: dotGit, commonDir: dotGit };
    }
    if (stats?.isFile()) {
      const gitDir = await readGitFile(dotGit);
      if (gitDir) {
        const common = await readSmallFile(path.join(gitDir, "commondir")).catch(() => undefined);
        const commonDir = common ? path.resolve(gitDir, common.toString("utf8").trim()) : gitDir;
        return { kind: "elsewhere", workTree: directory, gitDir, commonDir };
      }
    }
    if (directory === path.dirname(directory)) return undefined;
  }
}

async function isGitDir(directory: string): Promise<boolean> {
  const head = await lstat(path.join(directory, "HEAD")).catch(() => undefined);
  return head?.isFile() ?? false;
}

/** The git dir a `gitdir: <path>` file names (relative to the file's directory), if it is one. */
async function readGitFile(file: string): Promise<string | undefined> {
  const text = (await readSmallFile(file).catch(() => undefined))?.toString("utf8");
  const match = text === undefined ? null : /^gitdir: (.+?)\r?\n?$/.exec(text);
  if (!match?.[1]) return undefined;
  const gitDir = path.resolve(path.dirname(file), match[1]);
  return (await isGitDir(gitDir)) ? gitDir : undefined;
}

/** A regular file's bytes, never through a symlink, at most 1 MiB. */
async function readSmallFile(file: string): Promise<Buffer> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) throw new Error(`${file} is not a regular file`);
    if (stats.size > maxStateFileBytes) throw new Error(`${file} is bigger than 1 MiB`);
    const buffer = Buffer.alloc(stats.size);
    const { bytesRead } = await handle.read(buffer, 0, stats.size, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/**
 * The format of the repository whose config file is `configFile`, parsed by git itself as plain
 * data (`git config --file - --list`: from stdin, so neither a symlink nor an `include.path` is
 * followed). Everything else in the file — remotes and their credentials, `http.*`, hooks paths,
 * fsmonitor, filters — is left behind. A missing or unreadable file gives git's defaults.
 */
export async function readRepositoryFormat(
  configFile: string,
  warnings: string[],
): Promise<RepositoryFormat> {
  let bytes: Buffer;
  try {
    bytes = await readSmallFile(configFile);
  } catch (error) {
    if (!isErrno(error, "ENOENT")) {
      warnings.push(`ignored the git config ${configFile}: ${(error as Error).message}`);
    }
    return defaultRepositoryFormat;
  }
  const listed = await runHostGit(["config", "--file", "-", "--no-includes", "--list", "-z"], {
    // Never a repository: this call reads stdin and nothing else.
    gitDir: "/nonexistent/cordon",
    stdin: bytes,
  }).catch((error: unknown) => {
    warnings.push(`ignored the git config ${configFile}, which git cannot parse: ${String(error)}`);
    return Buffer.alloc(0);
  });
  const format: RepositoryFormat = { version: 0, extensions: [] };
  for (const entry of listed.toString("utf8").split("\0")) {
    if (entry === "") continue;
    const newline = entry.indexOf("\n");
    const key = newline === -1 ? entry : entry.slice(0, newline);
    const value = newline === -1 ? "true" : entry.slice(newline + 1);
    if (key === "core.repositoryformatversion") {
      format.version = value.trim() === "1" ? 1 : 0;
    } else if (key.startsWith("extensions.")) {
      const name = key.slice("extensions.".length);
      if (droppedExtensions.has(name)) continue;
      if (!plainValue.test(name) || !plainValue.test(value)) {
        warnings.push(`left out the git config entry ${key}, whose value is not a plain name`);
        continue;
      }
      format.extensions = format.extensions.filter(([existing]) => existing !== name);
      format.extensions.push([name, value]);
    }
  }
  return format;
}

/** The whole config cordon writes into every git dir it makes: the format and nothing else. */
export function gitConfigText(format: RepositoryFormat): string {
  const lines = ["[core]", `\trepositoryformatversion = ${format.version}`, "\tbare = false"];
  if (format.extensions.length > 0) {
    lines.push("[extensions]", ...format.extensions.map(([name, value]) => `\t${name} = ${value}`));
  }
  return `${lines.join("\n")}\n`;
}

/** Writes `text` as a new file owned by `owner` (when given). */
async function writeOwnedFile(
  file: string,
  text: string,
  owner: Owner | undefined,
  mode = 0o644,
): Promise<void> {
  await writeFile(file, text, { mode, flag: "wx" });
  await chmod(file, mode);
  if (owner) await lchown(file, owner.uid, owner.gid);
}

/**
 * Makes `gitDir` an empty repository of `format`, written by hand so no template (the user's
 * `init.templateDir` may hold hooks) and no config but cordon's goes in.
 */
export async function writeFreshRepository(
  gitDir: string,
  format: RepositoryFormat,
  owner: Owner | undefined,
): Promise<void> {
  for (const directory of [
    "",
    "objects",
    "objects/info",
    "objects/pack",
    "refs",
    "refs/heads",
    "refs/tags",
  ]) {
    const target = path.join(gitDir, directory);
    await mkdir(target, { mode: 0o755 });
    await chmod(target, 0o755);
    if (owner) await lchown(target, owner.uid, owner.gid);
  }
  await writeOwnedFile(path.join(gitDir, "HEAD"), "ref: refs/heads/main\n", owner);
  await writeOwnedFile(path.join(gitDir, "config"), gitConfigText(format), owner);
}

/** What copying a repository's git dir did. */
export interface GitDirCopy {
  format: RepositoryFormat;
  summary: CopySummary;
}

/**
 * Copies the git dir `.git` of `sourceRoot` into `targetRoot/.git` with nothing in it that makes
 * git run code or that holds credentials: no `hooks/`, no `info/attributes`, no `FETCH_HEAD`
 * (remote URLs), no `config.worktree`, no `worktrees/` (host paths, per-worktree config), no
 * `objects/info/alternates` (a pointer to host directories), no symlinks, no stale locks; and in
 * place of each `config` (the top one and those of submodules under `modules/`) a fresh one
 * with the repository's format only. Objects, refs, logs, the index and `info/exclude` come along,
 * so git in the sandbox sees the user's history and staged state.
 */
export async function copySanitizedGitDir(options: {
  sourceRoot: string;
  targetRoot: string;
  owner: Owner | undefined;
  warnings: string[];
  signal: AbortSignal | undefined;
  onCopied?: ((relative: string) => void) | undefined;
}): Promise<GitDirCopy> {
  const copier = new TreeCopier({
    sourceRoot: options.sourceRoot,
    targetRoot: options.targetRoot,
    owner: options.owner,
    symlinks: "skip",
    signal: options.signal,
    onCopied: options.onCopied,
  });
  const source = (relative: string): string => path.join(options.sourceRoot, relative);
  const entries = async (relative: string): Promise<Dirent[]> =>
    readdir(source(relative), { withFileTypes: true }).catch(() => []);

  let packed = { files: 0, bytes: 0 };

  const copyGitDir = async (relative: string): Promise<RepositoryFormat> => {
    await copier.makeDirectory(relative);
    const format = await readRepositoryFormat(source(`${relative}/config`), options.warnings);
    for (const entry of await entries(relative)) {
      const child = `${relative}/${entry.name}`;
      if (entry.isDirectory() && entry.name === "info") {
        const kept = (await entries(child)).filter((e) => e.name !== "attributes");
        await copier.copyEntries(kept.map((e) => `${child}/${e.name}`));
      } else if (entry.isDirectory() && entry.name === "objects") {
        await copyObjects(child, objectHash(format));
      } else if (entry.isDirectory() && entry.name === "modules") {
        await copyModules(child);
      } else if (!droppedFromGitDir.has(entry.name) && !entry.name.endsWith(".lock")) {
        await copier.copyEntries([child]);
      }
    }
    const config = path.join(options.targetRoot, relative, "config");
    await writeOwnedFile(config, gitConfigText(format), options.owner);
    return format;
  };

  const copyObjects = async (
    relative: string,
    hash: "sha1" | "sha256" | undefined,
  ): Promise<void> => {
    const loose: LooseObject[] = [];
    const rest: string[] = [];
    for (const entry of await entries(relative)) {
      const child = `${relative}/${entry.name}`;
      if (hash && entry.isDirectory() && looseDirectory.test(entry.name)) {
        // Loose objects go into one pack below; anything else in the directory is copied.
        const name = looseName[hash];
        for (const file of await entries(child)) {
          if (file.isFile() && name.test(file.name)) {
            loose.push({ relative: `${child}/${file.name}`, id: `${entry.name}${file.name}` });
          } else {
            rest.push(`${child}/${file.name}`);
          }
        }
      } else if (entry.isDirectory() && entry.name === "info") {
        for (const info of await entries(child)) {
          if (info.name === "alternates" || info.name === "http-alternates") {
            options.warnings.push(
              `${source(child)}/${info.name} points git at objects elsewhere on the host; it was not copied, so the copy's history may be incomplete (run \`git repack -a -d\` in the repository to bring them in)`,
            );
          } else {
            await copier.copyEntries([`${child}/${info.name}`]);
          }
        }
      } else {
        await copier.copyEntries([child]);
      }
    }
    if (hash && loose.length > 0 && (await copier.makeDirectory(`${relative}/pack`))) {
      const pack = await packLooseObjects({
        sourceRoot: options.sourceRoot,
        objects: loose,
        targetDirectory: path.join(options.targetRoot, relative, "pack"),
        hash,
        owner: options.owner,
        signal: options.signal,
      });
      for (const file of pack.files) options.onCopied?.(path.join(relative, "pack", file));
      packed = { files: packed.files + pack.files.length, bytes: packed.bytes + pack.bytes };
      rest.push(...pack.left.map((object) => object.relative));
    } else {
      rest.push(...loose.map((object) => object.relative));
    }
    await copier.copyEntries(rest);
  };

  // `modules/<name>` is a submodule's git dir; names may contain slashes.
  const copyModules = async (relative: string): Promise<void> => {
    for (const entry of await entries(relative)) {
      if (!entry.isDirectory()) continue;
      const child = `${relative}/${entry.name}`;
      if (await isGitDir(source(child))) await copyGitDir(child);
      else await copyModules(child);
    }
  };

  const format = await copyGitDir(".git");
  const summary = copier.summary;
  return {
    format,
    summary: {
      ...summary,
      files: summary.files + packed.files,
      bytes: summary.bytes + packed.bytes,
    },
  };
}

/** `objects/<2 hex>`: a directory of loose objects. */
const looseDirectory = /^[0-9a-f]{2}$/;
/** The rest of a loose object's id, by the repository's hash. */
const looseName = { sha1: /^[0-9a-f]{38}$/, sha256: /^[0-9a-f]{62}$/ } as const;

/** The repository's object hash; undefined for one git may add later (its objects are copied). */
function objectHash(format: RepositoryFormat): "sha1" | "sha256" | undefined {
  const named = format.extensions.find(([name]) => name === "objectformat")?.[1] ?? "sha1";
  return named === "sha1" || named === "sha256" ? named : undefined;
}

/** Entries of a git dir never copied (see copySanitizedGitDir); `config` is rewritten. */
const droppedFromGitDir = new Set([
  "config",
  "config.worktree",
  "hooks",
  "FETCH_HEAD",
  "worktrees",
]);

/**
 * A git dir (`gitDir`, new) for listing the files of a repository cordon does not copy (a linked
 * worktree, a submodule, a workspace below the repository's top): cordon's config with the
 * repository's format, the repository's index and `info/exclude`, nothing else. Objects are not
 * needed to list an index (a sparse index, which would need them, makes the listing fail loudly).
 */
export async function writeListingGitDir(
  repository: Extract<SourceRepository, { kind: "elsewhere" }>,
  gitDir: string,
  warnings: string[],
): Promise<void> {
  const format = await readRepositoryFormat(path.join(repository.commonDir, "config"), warnings);
  await writeFreshRepository(gitDir, format, undefined);
  const fromGitDir = new TreeCopier({
    sourceRoot: await realpath(repository.gitDir),
    targetRoot: gitDir,
    symlinks: "skip",
  });
  const shared = (await readdir(repository.gitDir)).filter((n) => n.startsWith("sharedindex."));
  await fromGitDir.copyEntries(["index", ...shared]);
  const fromCommonDir = new TreeCopier({
    sourceRoot: await realpath(repository.commonDir),
    targetRoot: gitDir,
    symlinks: "skip",
  });
  await fromCommonDir.copyEntries(["info/exclude"]);
}
