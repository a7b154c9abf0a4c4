import { constants, type Dirent } from "node:fs";
import {
  chmod,
  copyFile,
  lchown,
  lstat,
  mkdir,
  open,
  readdir,
  readlink,
  realpath,
  rm,
  symlink,
  utimes,
} from "node:fs/promises";
import path from "node:path";

import { throwIfAborted } from "../../common/index.js";
import type { Owner } from "./owner.js";
import { isInside } from "./paths.js";

/** Where a listed entry's source directory really is (see `sourceParentPlace`). */
type SourcePlace = "inside" | "outside" | "gone";

/** What a copy did. */
export interface CopySummary {
  files: number;
  directories: number;
  symlinks: number;
  bytes: number;
  /** Files of `files` that share their blocks with the source (reflink); 0 unless `clone` is on. */
  cloned?: number;
  /** Relative paths not copied, with why (sockets, devices, paths that lead outside the source). */
  skipped: { path: string; reason: string }[];
}

export interface TreeCopierOptions {
  /** Real (symlink-resolved) absolute path of the directory copied from. */
  sourceRoot: string;
  /** Absolute path of an existing, private directory copied into. */
  targetRoot: string;
  /** Owner of everything created (needs root); undefined keeps this process's owner. */
  owner?: Owner | undefined;
  /**
   * Real absolute paths never copied, nor anything below them (the state directory or the
   * private workspaces' root when they live in the workspace).
   */
  exclude?: readonly string[] | undefined;
  signal?: AbortSignal | undefined;
  /**
   * "copy" (default) recreates symlinks as symlinks; "skip" leaves them out and reports them —
   * for git state, where git never makes one and a link would make later host reads follow it.
   */
  symlinks?: "copy" | "skip" | undefined;
  /**
   * Asked before each entry is copied (relative, `/`-separated): true leaves it out (a directory
   * with everything below it). The seed's secret filter (secret-paths.ts).
   */
  leaveOut?:
    ((relative: string, kind: "file" | "directory" | "symlink") => Promise<boolean>) | undefined;
  /** Files copied at once. Default 16. */
  concurrency?: number | undefined;
  /**
   * Try a reflink (FICLONE) first, so the copy shares blocks with the source until either side
   * writes (btrfs, XFS, bcachefs); where the filesystem cannot, files are copied. Default false.
   */
  clone?: boolean | undefined;
  /**
   * Told of each entry once it is complete in the target (relative, in the order made: a directory
   * before anything in it), so a caller can move the copy on while the rest is copied
   * (docker/workspace-volumes.ts streams it into an engine volume).
   */
  onCopied?: ((relative: string) => void) | undefined;
  /**
   * Most bytes of file content to copy; a file that would go past it stops the copy with a
   * `CopyLimitError` before it is copied. Default: no limit.
   */
  byteLimit?: number | undefined;
}

/** A copy stopped because it would have gone past `byteLimit`. */
export class CopyLimitError extends Error {
  constructor(
    /** The file that would have gone past it (relative). */
    readonly path: string,
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`copying ${path} would take the copy past ${limit} bytes`);
    this.name = "CopyLimitError";
  }
}

/** Errors of a forced reflink that mean "this filesystem (pair) cannot", not "this file failed". */
const cannotClone = ["EOPNOTSUPP", "ENOTSUP", "EXDEV", "EINVAL", "ENOSYS", "ETXTBSY"];

const maxSkippedReported = 100;

/**
 * Copies entries of one directory tree into another without ever reading outside the source:
 * symlinks are recreated as symlinks (never followed), sockets, FIFOs and devices are skipped, and
 * each file is opened with O_NOFOLLOW and checked, through /proc/self/fd, to really lie inside the
 * source root — so neither a symlinked parent directory nor a file swapped for a link mid-copy can
 * pull a host file into the sandbox.
 */
export class TreeCopier {
  readonly summary: CopySummary = { files: 0, directories: 0, symlinks: 0, bytes: 0, skipped: [] };
  private readonly createdDirectories = new Set<string>([""]);
  private readonly checkedSourceDirectories = new Map<string, SourcePlace>();
  private readonly active = new Set<Promise<void>>();
  private failure: Error | undefined;
  /** Bytes of files being copied or copied (for `byteLimit`). */
  private claimedBytes = 0;
  /** False once a reflink failed because the filesystem cannot: every later file is copied. */
  private cloning: boolean;

  constructor(private readonly options: TreeCopierOptions) {
    this.cloning = options.clone === true;
  }

  /** Copies the whole source tree. */
  async copyAll(): Promise<CopySummary> {
    await this.copyDirectoryContents("");
    await this.drain();
    return this.summary;
  }

  /**
   * Copies the listed entries (relative, `/`-separated); directories among them are copied
   * recursively, missing entries are ignored, parents are created as plain directories.
   */
  async copyEntries(entries: Iterable<string>): Promise<CopySummary> {
    for (const entry of entries) {
      const relative = normalizeRelative(entry);
      if (relative === undefined) {
        this.skip(entry, "not a plain relative path");
        continue;
      }
      await this.copyEntry(relative);
    }
    await this.drain();
    return this.summary;
  }

  /** Creates `relative` (and its parents) in the target as a plain directory, mode 0755. */
  async makeDirectory(relative: string): Promise<boolean> {
    const normalized = normalizeRelative(relative);
    return normalized !== undefined && (await this.ensureTargetDirectory(normalized));
  }

  private async copyEntry(relative: string): Promise<void> {
    throwIfAborted(this.options.signal, "workspace seeding");
    if (this.failure) throw this.failure;
    const source = path.join(this.options.sourceRoot, relative);
    if (this.isExcluded(source)) return;
    const parent = await this.sourceParentPlace(path.dirname(relative));
    // Gone: a listed entry whose directory was deleted in the work tree (`rm -r dir` of tracked
    // files, not yet committed) is not in the copy either, as a missing entry itself is not.
    if (parent === "gone") return;
    if (parent === "outside") {
      this.skip(relative, "a parent directory leads outside the workspace");
      return;
    }
    let stats;
    try {
      stats = await lstat(source);
    } catch (error) {
      if (isErrno(error, "ENOENT") || isErrno(error, "ENOTDIR")) return;
      throw error;
    }
    const kind = stats.isDirectory() ? "directory" : stats.isSymbolicLink() ? "symlink" : "file";
    if (await this.options.leaveOut?.(relative, kind)) return;
    const parentReady = await this.ensureTargetDirectory(path.dirname(relative));
    if (!parentReady) {
      this.skip(relative, "its parent is not a directory in the copy");
    } else if (stats.isDirectory()) {
      if (await this.ensureTargetDirectory(relative, stats.mode)) {
        await this.copyDirectoryContents(relative);
      } else {
        this.skip(relative, "already copied as something else");
      }
    } else if (stats.isSymbolicLink()) {
      await this.copySymlink(relative);
    } else if (stats.isFile()) {
      await this.schedule(() => this.copyFile(relative));
    } else {
      this.skip(relative, "not a file, directory or symlink");
    }
  }

  private async copyDirectoryContents(relative: string): Promise<void> {
    const source = path.join(this.options.sourceRoot, relative);
    let entries: Dirent[];
    try {
      entries = await readdir(source, { withFileTypes: true });
    } catch (error) {
      if (isErrno(error, "ENOENT")) return;
      throw error;
    }
    for (const entry of entries) {
      throwIfAborted(this.options.signal, "workspace seeding");
      if (this.failure) throw this.failure;
      const child = relative === "" ? entry.name : `${relative}/${entry.name}`;
      const childSource = path.join(this.options.sourceRoot, child);
      if (this.isExcluded(childSource)) continue;
      const kind = entry.isDirectory() ? "directory" : entry.isSymbolicLink() ? "symlink" : "file";
      if (await this.options.leaveOut?.(child, kind)) continue;
      if (entry.isDirectory()) {
        const stats = await lstat(childSource);
        if (await this.ensureTargetDirectory(child, stats.mode)) {
          await this.copyDirectoryContents(child);
        }
      } else if (entry.isSymbolicLink()) {
        await this.copySymlink(child);
      } else if (entry.isFile()) {
        await this.schedule(() => this.copyFile(child));
      } else {
        this.skip(child, "not a file, directory or symlink");
      }
    }
  }

  private async copyFile(relative: string): Promise<void> {
    const source = path.join(this.options.sourceRoot, relative);
    const target = path.join(this.options.targetRoot, relative);
    let input;
    try {
      // O_NONBLOCK: a FIFO swapped in for the file must not hang the copy.
      input = await open(
        source,
        constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY,
      );
    } catch (error) {
      if (isErrno(error, "ENOENT")) return;
      if (isErrno(error, "ELOOP")) {
        this.skip(relative, "became a symlink while copying");
        return;
      }
      throw error;
    }
    try {
      const stats = await input.stat();
      if (!stats.isFile()) {
        this.skip(relative, "not a regular file");
        return;
      }
      const descriptor = await this.descriptorPath(input.fd);
      if (descriptor === false) {
        this.skip(relative, "resolves outside the workspace");
        return;
      }
      const limit = this.options.byteLimit;
      if (limit !== undefined && this.claimedBytes + stats.size > limit) {
        throw new CopyLimitError(relative, this.claimedBytes + stats.size, limit);
      }
      this.claimedBytes += stats.size;
      // Through the open descriptor: the very file checked above, copied by the kernel
      // (reflink, or copy_file_range), several times faster than streaming it through Node.
      await this.copyContent(descriptor ?? source, target);
      if (this.options.owner) await lchown(target, this.options.owner.uid, this.options.owner.gid);
      // Plain permission bits only: no setuid/setgid copies.
      await chmod(target, stats.mode & 0o777);
      // Keep modification times so build tools do not rebuild everything.
      await utimes(target, stats.atime, stats.mtime);
      this.options.onCopied?.(relative);
      this.summary.files += 1;
      this.summary.bytes += stats.size;
    } finally {
      await input.close();
    }
  }

  private async copyContent(source: string, target: string): Promise<void> {
    if (this.cloning) {
      try {
        await copyFile(source, target, constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE_FORCE);
        this.summary.cloned = (this.summary.cloned ?? 0) + 1;
        return;
      } catch (error) {
        if (!cannotClone.some((code) => isErrno(error, code))) throw error;
        this.cloning = false;
        // A failed clone may leave an empty target behind.
        await rm(target, { force: true });
      }
    }
    await copyFile(source, target, constants.COPYFILE_EXCL);
  }

  private async copySymlink(relative: string): Promise<void> {
    if (this.options.symlinks === "skip") {
      this.skip(relative, "a symlink inside .git (git makes none)");
      return;
    }
    const source = path.join(this.options.sourceRoot, relative);
    const target = path.join(this.options.targetRoot, relative);
    // The link text only: whatever it points at stays where it is.
    const linkText = await readlink(source);
    await symlink(linkText, target);
    if (this.options.owner) await lchown(target, this.options.owner.uid, this.options.owner.gid);
    this.options.onCopied?.(relative);
    this.summary.symlinks += 1;
  }

  /**
   * Creates `relative` and its missing parents in the target as plain directories; false when
   * something that is not a directory (a symlink this copy made) already sits on the way.
   */
  private async ensureTargetDirectory(relative: string, sourceMode?: number): Promise<boolean> {
    if (relative === "." || this.createdDirectories.has(relative)) return true;
    if (!(await this.ensureTargetDirectory(path.dirname(relative)))) return false;
    const target = path.join(this.options.targetRoot, relative);
    // The owner must be able to work in every directory it gets.
    const mode = sourceMode === undefined ? 0o755 : (sourceMode & 0o777) | 0o700;
    try {
      await mkdir(target, { mode });
      this.summary.directories += 1;
      if (this.options.owner) await lchown(target, this.options.owner.uid, this.options.owner.gid);
      this.options.onCopied?.(relative);
    } catch (error) {
      if (!isErrno(error, "EEXIST")) throw error;
      // Something this copy already made; only a real directory may be entered.
      if (!(await lstat(target)).isDirectory()) return false;
    }
    this.createdDirectories.add(relative);
    return true;
  }

  /** Where a source directory really is: inside the source root, outside it, or not there. */
  private async sourceParentPlace(relativeDirectory: string): Promise<SourcePlace> {
    if (relativeDirectory === "." || relativeDirectory === "") return "inside";
    const cached = this.checkedSourceDirectories.get(relativeDirectory);
    if (cached !== undefined) return cached;
    let place: SourcePlace;
    try {
      const real = await realpath(path.join(this.options.sourceRoot, relativeDirectory));
      place = isInside(this.options.sourceRoot, real) ? "inside" : "outside";
    } catch (error) {
      place = isErrno(error, "ENOENT") || isErrno(error, "ENOTDIR") ? "gone" : "outside";
    }
    this.checkedSourceDirectories.set(relativeDirectory, place);
    return place;
  }

  /**
   * `/proc/self/fd/<fd>` when the open file really lies inside the source root, false when it
   * does not, undefined where there is no /proc (not Linux: the parent check is all there is).
   */
  private async descriptorPath(fd: number): Promise<string | false | undefined> {
    const descriptor = `/proc/self/fd/${fd}`;
    let real: string;
    try {
      real = await readlink(descriptor);
    } catch {
      return undefined;
    }
    return isInside(this.options.sourceRoot, real) ? descriptor : false;
  }

  private isExcluded(source: string): boolean {
    return (this.options.exclude ?? []).some((excluded) => isInside(excluded, source));
  }

  private skip(relative: string, reason: string): void {
    if (this.summary.skipped.length < maxSkippedReported) {
      this.summary.skipped.push({ path: relative, reason });
    }
  }

  private async schedule(task: () => Promise<void>): Promise<void> {
    const limit = this.options.concurrency ?? 16;
    while (this.active.size >= limit) await Promise.race(this.active);
    if (this.failure) throw this.failure;
    const running: Promise<void> = task()
      .catch((error: unknown) => {
        this.failure ??= error instanceof Error ? error : new Error(String(error));
      })
      .finally(() => this.active.delete(running));
    this.active.add(running);
  }

  private async drain(): Promise<void> {
    await Promise.all(this.active);
    if (this.failure) throw this.failure;
  }
}

/** `a/b/c` from a git path; undefined for absolute paths, `..` segments and empty names. */
export function normalizeRelative(entry: string): string | undefined {
  const trimmed = entry.endsWith("/") ? entry.slice(0, -1) : entry;
  if (trimmed === "" || trimmed.startsWith("/") || trimmed.includes("\0")) return undefined;
  const segments = trimmed.split("/");
  if (segments.some((s) => s === "" || s === "." || s === "..")) return undefined;
  return segments.join(path.sep);
}

export function isErrno(error: unknown, code: string): boolean {
  return typeof error === "object" && error !== null && "code" in error && error.code === code;
}
