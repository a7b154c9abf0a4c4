import { createHash } from "node:crypto";
import type { Stats } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import path from "node:path";

import { throwIfAborted } from "../../common/index.js";
import { listGitFiles } from "./git-files.js";
import { findRepository } from "./git-state.js";
import { isInside } from "./paths.js";
import { isErrno } from "./tree-copy.js";

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

  constructor(
    private readonly sourceRoot: string,
    /** Real absolute paths left out (the state directory inside the workspace: it changes). */
    private readonly exclude: readonly string[],
    private readonly signal?: AbortSignal | undefined,
  ) {}

  /** Adds every entry below `relative` (a directory of the source), in name order. */
  async addTree(relative: string): Promise<void> {
    const absolute = path.join(this.sourceRoot, relative);
    if (this.#excluded(absolute)) return;
    const stats = await this.#add(relative);
    if (!stats?.isDirectory()) return;
    throwIfAborted(this.signal, "fingerprinting the workspace");
    const names = (await readdir(absolute).catch(() => [] as string[])).sort();
    for (const name of names) await this.addTree(path.posix.join(relative, name));
  }

  /** Adds the listed entries (relative, `/`-separated: what git lists), in the order given. */
  async addEntries(entries: readonly string[]): Promise<void> {
    for (const entry of entries) {
      if (this.#excluded(path.join(this.sourceRoot, entry))) continue;
      await this.#add(entry);
    }
  }

  /** The fingerprint: a hex digest of everything added, and how many entries went into it. */
  digest(): string {
    return `${this.#entries}:${this.#hash.digest("hex")}`;
  }

  async #add(relative: string): Promise<Stats | undefined> {
    let stats: Stats | undefined;
    try {
      stats = await lstat(path.join(this.sourceRoot, relative), { bigint: false });
    } catch (error) {
      if (!isErrno(error, "ENOENT") && !isErrno(error, "ENOTDIR")) throw error;
    }
    this.#entries += 1;
    this.#hash.update(
      stats
        ? `${relative}\0${typeOf(stats)}\0${stats.size}\0${stats.mode}\0${stats.ino}\0${stats.mtimeMs}\0${stats.ctimeMs}\n`
        : `${relative}\0missing\n`,
    );
    return stats;
  }

  #excluded(absolute: string): boolean {
    return this.exclude.some((excluded) => isInside(excluded, absolute));
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
  const fingerprint = new SourceFingerprint(sourceRoot, options.exclude, signal);
  if (!repository) {
    await fingerprint.addTree("");
    return fingerprint.digest();
  }
  await fingerprint.addTree(".git");
  const listed = await listGitFiles({
    gitDir: options.gitDir,
    workTree: sourceRoot,
    directory: sourceRoot,
    signal,
  });
  await fingerprint.addEntries(listed);
  return fingerprint.digest();
}
