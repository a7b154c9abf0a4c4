import { constants, type Stats } from "node:fs";
import { lstat, open, readlink, realpath, type FileHandle } from "node:fs/promises";
import path from "node:path";

import { SandboxStartError, throwIfAborted } from "../../common/index.js";
import { isInside } from "./paths.js";
import type { StreamedBaseline } from "./streamed-baseline.js";
import { isErrno, normalizeRelative, type CopySummary } from "./tree-copy.js";

/**
 * Seeding without a copy on this host (a copy in engine volumes, issue 29): the files git lists
 * are read from the user's repository once and their bytes go two ways at once — to a sink (the
 * tar the engine extracts into the volume) and to the baseline (`StreamedBaseline`) — instead of
 * being copied into a closed directory that is then packed and recorded (tree-copy.ts, a third
 * of a seed's time and the disk's). What the copy and its baseline hold is what the copy-based
 * seed gives them.
 *
 * Why the user's repository cannot trick it (it may be hostile): every entry is judged as
 * `TreeCopier` judges it — a listed path must be plain (no `..`, not absolute), its parent
 * directory must really lie inside the repository (realpath), links are sent as links (their
 * text, never followed), and a file is opened with O_NOFOLLOW | O_NONBLOCK (a link or FIFO
 * swapped in cannot be followed or hang the seed), checked to be a regular file and, through
 * /proc/self/fd, to lie inside the repository, and read through that descriptor only. No program
 * runs over the repository here: host git only listed it (git-files.ts) through cordon's git dir.
 *
 * What it cannot give exactly as the copy-based seed does, it does not take (`planStreamedSeed`
 * says why, and the caller seeds as before): a listed directory (a nested repository or
 * submodule), a name git treats specially (`.git`, NTFS look-alikes), a path that is both a file
 * and a directory, a link named `.git*`.
 */

/** One entry streamed to a sink: a `/`-separated path below the copy's root. */
export interface StreamedEntryHeader {
  path: string;
  /** Permission bits (no setuid, setgid or sticky). */
  mode: number;
  mtime: Date;
}

/**
 * Where a streamed seed's entries go, in order, each awaited before the next: a directory
 * before anything below it.
 */
export interface SeedSink {
  /**
   * Called once, before the first entry, with the closed seed directory, which is complete:
   * it holds the seed's `.git` (copied and sanitized as before), and nothing is added to it after.
   */
  open(directory: string): Promise<void>;
  directory(entry: StreamedEntryHeader): Promise<void>;
  symlink(entry: StreamedEntryHeader & { target: string }): Promise<void>;
  /** A file of `size` bytes; `content` yields exactly that many. */
  file(
    entry: StreamedEntryHeader & { size: number },
    content: AsyncIterable<Uint8Array>,
  ): Promise<void>;
}

/** A listed entry the stream takes, as `lstat` found it when planned. */
interface PlannedEntry {
  relative: string;
  kind: "file" | "symlink" | "other";
  size: number;
}

export type StreamPlan =
  | { streamable: true; entries: PlannedEntry[]; skipped: CopySummary["skipped"] }
  | { streamable: false; reason: string };

export interface PlanStreamedSeedOptions {
  /** Real absolute path of the repository's work tree (the agent workspace). */
  sourceRoot: string;
  /** Real absolute paths never seeded, nor anything below them (as `TreeCopierOptions`). */
  exclude: readonly string[];
  /** The seed's secret filter (secret-paths.ts), asked as `TreeCopier` asks it. */
  leaveOut: (relative: string, kind: "file" | "directory" | "symlink") => Promise<boolean>;
  signal?: AbortSignal | undefined;
}

/**
 * What streaming `listed` (git's listing, relative to `sourceRoot`) would seed, decided before
 * anything is sent, or why it cannot be streamed. Entries are left out and skipped exactly as
 * `TreeCopier.copyEntries` leaves them out and skips them.
 */
export async function planStreamedSeed(
  listed: readonly string[],
  options: PlanStreamedSeedOptions,
): Promise<StreamPlan> {
  const skipped: CopySummary["skipped"] = [];
  const candidates: string[] = [];
  for (const entry of listed) {
    const relative = normalizeRelative(entry);
    if (relative === undefined) {
      skipped.push({ path: entry, reason: "not a plain relative path" });
      continue;
    }
    const special = relative.split("/").find(isSpecialToGit);
    if (special !== undefined) return { streamable: false, reason: `${relative}: ${special}` };
    if (
      options.exclude.some((excluded) =>
        isInside(excluded, path.join(options.sourceRoot, relative)),
      )
    ) {
      continue;
    }
    candidates.push(relative);
  }
  const conflict = fileAndDirectory(candidates);
  if (conflict !== undefined) {
    return { streamable: false, reason: `${conflict} is listed both as a file and a directory` };
  }
  const places = new ParentPlaces(options.sourceRoot);
  const look = async (relative: string) => {
    const place = await places.of(path.posix.dirname(relative));
    if (place !== "inside") return { relative, place, stats: undefined };
    const stats = await lstat(path.join(options.sourceRoot, relative)).catch((error: unknown) => {
      if (isErrno(error, "ENOENT") || isErrno(error, "ENOTDIR")) return undefined;
      throw error;
    });
    return { relative, place, stats };
  };
  const found: Awaited<ReturnType<typeof look>>[] = [];
  // A batch at a time: a repository of 100,000 files is not 100,000 calls in flight.
  for (let at = 0; at < candidates.length; at += lookBatch) {
    throwIfAborted(options.signal, "workspace seeding");
    found.push(...(await Promise.all(candidates.slice(at, at + lookBatch).map(look))));
  }
  const entries: PlannedEntry[] = [];
  for (const { relative, place, stats } of found) {
    throwIfAborted(options.signal, "workspace seeding");
    // Gone (a directory deleted in the work tree) or missing: not in the copy either.
    if (place === "gone" || (place === "inside" && !stats)) continue;
    if (place === "outside") {
      skipped.push({ path: relative, reason: "a parent directory leads outside the workspace" });
      continue;
    }
    if (!stats) continue;
    if (stats.isDirectory()) {
      return { streamable: false, reason: `${relative} is a directory (a nested repository?)` };
    }
    const kind = stats.isSymbolicLink() ? "symlink" : "file";
    if (kind === "symlink" && path.posix.basename(relative).toLowerCase().startsWith(".git")) {
      return { streamable: false, reason: `${relative} is a link git reads specially` };
    }
    if (await options.leaveOut(relative, kind)) continue;
    entries.push({
      relative,
      kind: stats.isFile() || stats.isSymbolicLink() ? kind : "other",
      size: stats.size,
    });
  }
  return { streamable: true, entries, skipped };
}

export interface StreamSeedOptions {
  sourceRoot: string;
  sink: SeedSink;
  baseline: StreamedBaseline;
  signal?: AbortSignal | undefined;
}

/**
 * Streams the planned entries to the sink and the baseline at once (see the module comment);
 * what was streamed, in `TreeCopier`'s terms. Directories are sent as the copy would make them
 * (0755, before their first entry); files keep their permission bits and times.
 */
export async function streamSeed(
  plan: Extract<StreamPlan, { streamable: true }>,
  options: StreamSeedOptions,
): Promise<CopySummary> {
  const summary: CopySummary = {
    files: 0,
    directories: 0,
    symlinks: 0,
    bytes: 0,
    skipped: [...plan.skipped],
  };
  const reader = new FileReader(options.sourceRoot);
  const made = new Set<string>(["."]);
  const now = new Date();
  const ensureDirectory = async (relative: string): Promise<void> => {
    if (made.has(relative)) return;
    await ensureDirectory(path.posix.dirname(relative));
    await options.sink.directory({ path: relative, mode: 0o755, mtime: now });
    made.add(relative);
    summary.directories += 1;
  };
  const skip = (relative: string, reason: string): void => {
    if (summary.skipped.length < maxSkippedReported)
      summary.skipped.push({ path: relative, reason });
  };
  const { entries } = plan;
  const reads = new Map<number, Promise<LoadedFile>>();
  let next = 0;
  const readAhead = (upto: number): void => {
    for (; next < entries.length && next <= upto; next += 1) {
      const entry = entries[next];
      if (entry?.kind !== "file" || entry.size > smallFileBytes) continue;
      const read = reader.load(entry.relative);
      // Awaited in order below; one that fails after an earlier failure must not go unhandled.
      read.catch(() => undefined);
      reads.set(next, read);
    }
  };
  try {
    for (let index = 0; index < entries.length; index += 1) {
      throwIfAborted(options.signal, "workspace seeding");
      readAhead(index + readAheadFiles);
      const entry = entries[index] as PlannedEntry;
      const read = reads.get(index);
      reads.delete(index);
      await ensureDirectory(path.posix.dirname(entry.relative));
      if (entry.kind === "other") {
        skip(entry.relative, "not a file, directory or symlink");
      } else if (entry.kind === "symlink") {
        const target = await readLink(options.sourceRoot, entry.relative);
        if (typeof target !== "string") {
          if (target.reason) skip(entry.relative, target.reason);
          continue;
        }
        await options.baseline.symlink(entry.relative, target);
        // As the copy made it: a new link's mode and time.
        await options.sink.symlink({ path: entry.relative, mode: 0o777, mtime: now, target });
        summary.symlinks += 1;
      } else {
        const loaded = await (read ?? reader.load(entry.relative));
        if (loaded.kind === "left") {
          if (loaded.reason) skip(entry.relative, loaded.reason);
          continue;
        }
        const size = loaded.kind === "whole" ? loaded.data.byteLength : loaded.stats.size;
        const blob = await options.baseline.file(entry.relative, loaded.stats.mode, size);
        try {
          const content =
            loaded.kind === "whole" ? [loaded.data] : chunksOf(loaded.handle, entry.relative, size);
          await options.sink.file(
            { ...headerOf(entry.relative, loaded.stats), size },
            teed(content, (chunk) => blob.write(chunk)),
          );
          await blob.end();
        } finally {
          if (loaded.kind === "open") await loaded.handle.close();
        }
        summary.files += 1;
        summary.bytes += size;
      }
    }
  } finally {
    // A failure leaves read-ahead behind: close what it opened.
    for (const read of reads.values()) {
      void read.then(
        (loaded) => (loaded.kind === "open" ? loaded.handle.close() : undefined),
        () => undefined,
      );
    }
  }
  return summary;
}

/** Listed entries looked at (`realpath` of the parent, `lstat`) at once while planning. */
const lookBatch = 256;
/** Files up to this size are read ahead, whole; larger ones are read at their turn. */
const smallFileBytes = 256 * 1024;
/** How many entries ahead small files are read (at most 4 MiB held). */
const readAheadFiles = 16;
/** Files up to this size are read whole before they are sent; larger ones stream in pieces. */
const wholeFileBytes = 8 * 1024 * 1024;
/** Bytes read at once from a file that streams. */
const pieceBytes = 256 * 1024;
const maxSkippedReported = 100;

type LoadedFile =
  | { kind: "whole"; stats: Stats; data: Buffer }
  | { kind: "open"; stats: Stats; handle: FileHandle }
  /** Not seeded: gone (no reason) or skipped (reason). */
  | { kind: "left"; reason?: string | undefined };

/** Opens the user's files the one safe way (see the module comment). */
class FileReader {
  constructor(private readonly sourceRoot: string) {}

  async load(relative: string): Promise<LoadedFile> {
    let handle: FileHandle;
    try {
      // O_NONBLOCK: a FIFO swapped in for the file must not hang the seed.
      handle = await open(
        path.join(this.sourceRoot, relative),
        constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY,
      );
    } catch (error) {
      if (isErrno(error, "ENOENT")) return { kind: "left" };
      if (isErrno(error, "ELOOP"))
        return { kind: "left", reason: "became a symlink while copying" };
      throw error;
    }
    let keep = false;
    try {
      const stats = await handle.stat();
      if (!stats.isFile()) return { kind: "left", reason: "not a regular file" };
      if (!(await this.liesInside(handle.fd))) {
        return { kind: "left", reason: "resolves outside the workspace" };
      }
      if (stats.size > wholeFileBytes) {
        keep = true;
        return { kind: "open", stats, handle };
      }
      // What the file holds now, up to the size it had when opened: the copy and the baseline
      // both get these bytes, whatever a writer does to the file meanwhile.
      const data = Buffer.alloc(stats.size);
      let filled = 0;
      while (filled < data.byteLength) {
        const { bytesRead } = await handle.read(data, filled, data.byteLength - filled, filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      return { kind: "whole", stats, data: data.subarray(0, filled) };
    } finally {
      if (!keep) await handle.close();
    }
  }

  /** Whether the open file really lies inside the source root (true where there is no /proc). */
  private async liesInside(fd: number): Promise<boolean> {
    let real: string;
    try {
      real = await readlink(`/proc/self/fd/${fd}`);
    } catch {
      return true;
    }
    return isInside(this.sourceRoot, real);
  }
}

/** A link's text; why it is left out when it is no longer a link. */
async function readLink(
  sourceRoot: string,
  relative: string,
): Promise<string | { reason?: string | undefined }> {
  try {
    return await readlink(path.join(sourceRoot, relative));
  } catch (error) {
    if (isErrno(error, "ENOENT")) return {};
    if (isErrno(error, "EINVAL")) return { reason: "stopped being a symlink while copying" };
    throw error;
  }
}

/** Exactly `size` bytes of an open file, in pieces; a file that shrank meanwhile fails the seed. */
async function* chunksOf(
  handle: FileHandle,
  relative: string,
  size: number,
): AsyncIterable<Uint8Array> {
  let position = 0;
  while (position < size) {
    const piece = Buffer.alloc(Math.min(pieceBytes, size - position));
    const { bytesRead } = await handle.read(piece, 0, piece.byteLength, position);
    if (bytesRead === 0) {
      throw new SandboxStartError(`${relative} shrank while it was being seeded`, {
        fix: "run the command again once nothing is writing the file",
      });
    }
    position += bytesRead;
    yield piece.subarray(0, bytesRead);
  }
}

/** `source`'s chunks, each handed to `also` before it is passed on. */
async function* teed(
  source: Iterable<Uint8Array> | AsyncIterable<Uint8Array>,
  also: (chunk: Uint8Array) => Promise<void>,
): AsyncIterable<Uint8Array> {
  for await (const chunk of source) {
    await also(chunk);
    yield chunk;
  }
}

function headerOf(relative: string, stats: Stats): StreamedEntryHeader {
  return { path: relative, mode: stats.mode & 0o777, mtime: stats.mtime };
}

/**
 * A path segment git treats as more than a name — `.git` and what NTFS reads as it (`.git.`,
 * `git~1`), names git refuses on some systems (`:`, `\`, a trailing dot or space) — or undefined.
 * Rare in a real repository, and the copy-based seed knows what git does with them.
 */
function isSpecialToGit(segment: string): boolean {
  const lower = segment.toLowerCase();
  return (
    lower === ".git" ||
    /^\.git[. ]/.test(lower) ||
    /^git~\d/.test(lower) ||
    segment.includes(":") ||
    segment.includes("\\") ||
    segment.endsWith(".") ||
    segment.endsWith(" ")
  );
}

/** A listed path that another listed path lies below, or undefined. */
function fileAndDirectory(relatives: readonly string[]): string | undefined {
  const directories = new Set<string>();
  for (const relative of relatives) {
    for (let at = relative.indexOf("/"); at !== -1; at = relative.indexOf("/", at + 1)) {
      directories.add(relative.slice(0, at));
    }
  }
  return relatives.find((relative) => directories.has(relative));
}

/** Where a source directory really is (`TreeCopier`'s check, cached per directory). */
class ParentPlaces {
  readonly #known = new Map<string, Promise<"inside" | "outside" | "gone">>();

  constructor(private readonly sourceRoot: string) {}

  of(relativeDirectory: string): Promise<"inside" | "outside" | "gone"> {
    if (relativeDirectory === "." || relativeDirectory === "") return Promise.resolve("inside");
    let place = this.#known.get(relativeDirectory);
    if (!place) {
      place = realpath(path.join(this.sourceRoot, relativeDirectory)).then(
        (real) => (isInside(this.sourceRoot, real) ? "inside" : "outside"),
        (error: unknown) =>
          isErrno(error, "ENOENT") || isErrno(error, "ENOTDIR") ? "gone" : "outside",
      );
      this.#known.set(relativeDirectory, place);
    }
    return place;
  }
}
