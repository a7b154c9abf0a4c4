import { createHash } from "node:crypto";
import { lstatSync, readdirSync, type Stats } from "node:fs";
import path from "node:path";

import { throwIfAborted } from "../../common/index.js";
import { listGitFiles } from "./git-files.js";
import { findRepository } from "./git-state.js";
import { isErrno } from "./tree-copy.js";

/**
 * Entries stat'ed between two yields to the event loop. Synchronous `lstat` of a cached inode is a
 * few microseconds, ten times less than one through the thread pool, so the fingerprint is taken
 * in slices that each hold the loop for about a millisecond.
 */
const sliceSize = 256;

/**
 * What a seed copies, as the file system describes it: for every entry its path, type, size,
 * mode, inode and change times (`lstat`, never following a link). Two fingerprints of one source
 * are equal only when nothing a seed reads has been written, created, removed, renamed or had its
 * mode changed in between — ctime moves on every one of those, whatever a tool does to mtime. A
 * warm pool member's seeded copy is handed over only while the source still has the fingerprint
 * taken before it was copied (docs/pool.md).
 *
 * Only metadata is read: no file is opened, no link followed, nothing run.
 */
export class SourceFingerprint {
  readonly #hash = createHash("sha256");
  #entries = 0;
  #sinceYield = 0;
  readonly #exclude: string[];

  constructor(
    private readonly sourceRoot: string,
    /** Real absolute paths left out (the state directory inside the workspace: it changes). */
    exclude: readonly string[],
    private readonly signal?: AbortSignal | undefined,
  ) {
    this.#exclude = exclude.map((excluded) => path.resolve(excluded));
  }

  /** Adds every entry below `relative` (a directory of the source), in name order. */
  async addTree(relative: string, options: { skip?: string } = {}): Promise<void> {
    if (relative === options.skip) return;
    const absolute = path.join(this.sourceRoot, relative);
    if (this.#excluded(absolute)) return;
    const stats = await this.#add(relative);
    if (!stats?.isDirectory()) return;
    for (const name of namesIn(absolute)) {
      await this.addTree(path.posix.join(relative, name), options);
    }
  }

  /**
   * Adds a repository's `.git`, all but its object store. Objects are named by their content and
   * never change, and a seed's copy can lack one the source has only when nothing names it yet:
   * whatever names one (a ref, HEAD, the index, packed-refs, a reflog) is added. A repository of
   * 600 files and three commits has ~2 200 entries in `.git`, ~40 of them outside `objects`.
   */
  addGitDir(): Promise<void> {
    return this.addTree(".git", { skip: ".git/objects" });
  }

  /** Adds the listed entries (relative, `/`-separated: what git lists), in the order given. */
  async addEntries(entries: readonly string[]): Promise<void> {
    for (const entry of entries) {
      if (!this.#excluded(path.join(this.sourceRoot, entry))) await this.#add(entry);
    }
  }

  /** The fingerprint: a hex digest of everything added, and how many entries went into it. */
  digest(): string {
    return `${this.#entries}:${this.#hash.digest("hex")}`;
  }

  async #add(relative: string): Promise<Stats | undefined> {
    if ((this.#sinceYield += 1) >= sliceSize) {
      this.#sinceYield = 0;
      await new Promise((resolve) => setImmediate(resolve));
      throwIfAborted(this.signal, "fingerprinting the workspace");
    }
    const stats = statOf(path.join(this.sourceRoot, relative));
    this.#entries += 1;
    this.#hash.update(
      stats
        ? `${relative}\0${typeOf(stats)}\0${stats.size}\0${stats.mode}\0${stats.ino}\0${stats.mtimeMs}\0${stats.ctimeMs}\n`
        : `${relative}\0missing\n`,
    );
    return stats;
  }

  #excluded(absolute: string): boolean {
    // Plain prefixes (both sides are absolute and normalised): path.relative per entry costs more
    // than the lstat.
    return this.#exclude.some(
      (excluded) => absolute === excluded || absolute.startsWith(`${excluded}${path.sep}`),
    );
  }
}

/** undefined for a path that is gone (or whose parent is no longer a directory). */
function statOf(file: string): Stats | undefined {
  try {
    return lstatSync(file, { throwIfNoEntry: false });
  } catch (error) {
    if (isErrno(error, "ENOTDIR")) return undefined;
    throw error;
  }
}

/**
 * A directory's names in order; one that cannot be read counts as empty (the entry's own stat,
 * mode included, is in the fingerprint already).
 */
function namesIn(directory: string): string[] {
  try {
    return readdirSync(directory).sort();
  } catch {
    return [];
  }
}

function typeOf(stats: Stats): string {
  if (stats.isFile()) return "f";
  if (stats.isDirectory()) return "d";
  if (stats.isSymbolicLink()) return "l";
  return "o";
}

/**
 * The fingerprint a seed of `sourceRoot` would take now, listing through `gitDir` (a member's
 * sanitized copy of `.git`, which is the source's as long as the fingerprint matches); undefined
 * for a workspace whose repository lies elsewhere (a subdirectory, a linked worktree), which a
 * seed lists another way and the pool does not take.
 */
export async function fingerprintNow(options: {
  sourceRoot: string;
  gitDir: string;
  exclude: readonly string[];
  signal?: AbortSignal | undefined;
}): Promise<string | undefined> {
  const { sourceRoot, signal } = options;
  const repository = await findRepository(sourceRoot);
  if (repository?.kind === "elsewhere") return undefined;
  const part = () => new SourceFingerprint(sourceRoot, options.exclude, signal);
  if (!repository) {
    const tree = part();
    await tree.addTree("");
    return tree.digest();
  }
  // The walk of .git and git's listing at once: neither needs the other.
  const gitDir = part();
  const [listed] = await Promise.all([
    listGitFiles({ gitDir: options.gitDir, workTree: sourceRoot, directory: sourceRoot, signal }),
    gitDir.addGitDir(),
  ]);
  const files = part();
  await files.addEntries(listed);
  return joinDigests(gitDir, files);
}

/** One fingerprint of a repository's two parts: its `.git`, and the files git lists. */
export function joinDigests(gitDir: SourceFingerprint, files: SourceFingerprint): string {
  return `${gitDir.digest()}+${files.digest()}`;
}
