import { once } from "node:events";
import { constants, type Stats } from "node:fs";
import {
  lstat,
  mkdir,
  mkdtemp,
  open,
  readdir,
  readlink,
  rename,
  rm,
  rmdir,
} from "node:fs/promises";
import path from "node:path";

import { pack, type Header, type Pack } from "tar-stream";

import { SandboxError, throwIfAborted } from "../../../common/index.js";
import type { SignalOption } from "../../sandbox.js";
import type { ExecTransport } from "../../shell/exec-transport.js";
import { ChunkChannel } from "../../shell/chunk-channel.js";
import { extractArchive, type ExtractedTree, type ExtractLimits } from "./archive-extract.js";
import { fileErrorFrom } from "./file-errors.js";

/** Byte and entry caps on what comes out, and an abort signal. */
export interface CopyTreeOutOptions extends SignalOption, ExtractLimits {}

/** Entries written on the host (directories included) and file bytes written. */
export type CopyTreeOutResult = ExtractedTree;

type Headers = Partial<Header> & Pick<Header, "name">;

const maxStderrBytes = 64 * 1024;

/** Host directory → container directory, as a tar stream through the stdin of `tar -x`. */
export async function copyTreeIn(
  transport: ExecTransport,
  hostDir: string,
  containerDir: string,
  options: SignalOption = {},
): Promise<void> {
  throwIfAborted(options.signal, "copying a tree into the sandbox");
  const root = path.resolve(hostDir);
  const rootStat = await lstat(root).catch((error: unknown) => {
    throw new SandboxError(`cannot copy ${root} into the sandbox: it cannot be read`, {
      cause: error,
    });
  });
  if (!rootStat.isDirectory()) {
    throw new SandboxError(`cannot copy ${root} into the sandbox: it is not a directory`);
  }
  const archive = pack();
  const packing = packTree(archive, root).then(
    () => archive.finalize(),
    (error: unknown) => archive.destroy(error instanceof Error ? error : new Error(String(error))),
  );
  const result = await transport.run(
    {
      cmd: [
        "bash",
        "-c",
        'mkdir -p -- "$1" && exec tar -x --no-same-owner --delay-directory-restore -C "$1" -f -',
        "cordon",
        containerDir,
      ],
      env: ["LC_ALL=C"],
      stdin: bytesOf(archive),
    },
    options.signal,
  );
  await packing;
  if (result.exitCode !== 0) {
    throw fileErrorFrom({
      operation: "copy into",
      path: containerDir,
      status: result.exitCode,
      stderr: result.stderr.toString("utf8"),
    });
  }
}

/** Where packed entries go and whose they are (`packTree`). */
export interface PackTreeOptions {
  /** Put before every entry's name (`workspace/`); default none. */
  prefix?: string | undefined;
  /** The numeric owner every entry gets; default 0:0 (tar's, as the extracting side decides). */
  owner?: { uid: number; gid: number } | undefined;
}

/**
 * Packs `root` in a stable order; sockets and devices are skipped, symlinks kept as links (never
 * followed). For trees of cordon's own only (a seed no container has reached, a build context).
 *
 * Fast enough to seed a copy into an engine volume (issue 29's bench): a directory's children are
 * `lstat`ed at once, and small files are read ahead of the archive, a few at a time, each in one
 * read; a large one streams in pieces as it is packed.
 */
export async function packTree(
  archive: Pack,
  root: string,
  options: PackTreeOptions = {},
): Promise<PackedTree> {
  const entries: PackedEntry[] = [];
  await listTree(root, "", options, entries);
  await packEntries(archive, entries);
  return packedTree(entries);
}

/** What `packTree` packed. */
export interface PackedTree {
  /** Entries (files, directories, links) below the root. */
  entries: number;
  /** Bytes of file content. */
  fileBytes: number;
}

function packedTree(entries: readonly PackedEntry[]): PackedTree {
  let fileBytes = 0;
  for (const entry of entries) if (entry.file !== undefined) fileBytes += entry.header.size ?? 0;
  return { entries: entries.length, fileBytes };
}

/** `entries` into `archive` in order, small files read a few ahead. */
async function packEntries(archive: Pack, entries: readonly PackedEntry[]): Promise<void> {
  const reads = new Map<number, Promise<Buffer>>();
  let next = 0;
  const readAhead = (upto: number): void => {
    for (; next < entries.length && next <= upto; next += 1) {
      const entry = entries[next];
      if (entry?.file === undefined || (entry.header.size ?? 0) > smallFileBytes) continue;
      const read = readSmallFile(entry.file);
      // Awaited in order below; one that fails after an earlier failure must not go unhandled.
      read.catch(() => undefined);
      reads.set(next, read);
    }
  };
  for (let index = 0; index < entries.length; index += 1) {
    readAhead(index + readAheadFiles);
    const entry = entries[index] as PackedEntry;
    const read = reads.get(index);
    reads.delete(index);
    if (read) {
      const data = await read;
      await addEntry(archive, { ...entry.header, size: data.byteLength }, data);
    } else if (entry.file !== undefined) {
      await addFile(archive, entry.header, entry.file);
    } else {
      await addEntry(archive, entry.header);
    }
  }
}

/**
 * Packs a tree of cordon's own while it is being made (a seed being copied, issue 29's bench):
 * `add` names an entry once it is complete, and it is packed soon after, so the engine extracts
 * the tree while the rest is copied; `finish`, once the tree is, packs what was never named or
 * changed since (the last entry of a path is what extraction leaves) and every directory again
 * (its final mode and time). The tar is then as `packTree` of the finished tree would leave it.
 */
export class GrowingTreePacker {
  readonly #queue: string[] = [];
  /** What each packed path was when packed (`PackedEntry.identity`). */
  readonly #packed = new Map<string, string>();
  #root: string | undefined;
  #wake: (() => void) | undefined;
  #finishing = false;
  readonly #running: Promise<void>;

  constructor(
    private readonly archive: Pack,
    private readonly options: PackTreeOptions & {
      /** Written first: the root's own entry. */
      rootEntry: Headers;
    },
  ) {
    this.#running = this.#run();
    // Awaited by `finish`; a caller that gives up on the tree never calls it.
    this.#running.catch(() => undefined);
  }

  /** `relative` (below `root`) is complete: pack it. */
  add(root: string, relative: string): void {
    this.#root ??= root;
    this.#queue.push(relative);
    this.#wake?.();
  }

  /** Packs the rest of the finished tree at `root`; what the tree holds (`packTree`'s count). */
  async finish(root: string): Promise<PackedTree> {
    this.#root ??= root;
    this.#finishing = true;
    this.#wake?.();
    await this.#running;
    const entries: PackedEntry[] = [];
    await listTree(root, "", this.options, entries);
    const listed = new Set(entries.map((entry) => entry.header.name));
    const gone = [...this.#packed.keys()].find((name) => !listed.has(name));
    // Extraction would keep it: the copy would hold what the seed no longer does.
    if (gone !== undefined) throw new SandboxError(`${gone} was packed, then left the seed`);
    await packEntries(
      this.archive,
      entries.filter(
        (entry) =>
          entry.header.type === "directory" ||
          this.#packed.get(entry.header.name) !== entry.identity,
      ),
    );
    return packedTree(entries);
  }

  async #run(): Promise<void> {
    await addEntry(this.archive, this.options.rootEntry);
    for (;;) {
      const root = this.#root;
      if (this.#queue.length === 0 || root === undefined) {
        if (this.#finishing) return;
        await new Promise<void>((resolve) => (this.#wake = resolve));
        this.#wake = undefined;
        continue;
      }
      const names = this.#queue.splice(0);
      const infos = await Promise.all(names.map((name) => lstat(path.join(root, name))));
      const entries: PackedEntry[] = [];
      for (const [index, name] of names.entries()) {
        const entry = await entryOf(root, name, infos[index] as Stats, this.options);
        if (!entry) continue;
        this.#packed.set(entry.header.name, entry.identity);
        entries.push(entry);
      }
      await packEntries(this.archive, entries);
    }
  }
}

/** Files up to this size are read whole, ahead of the archive; larger ones stream. */
const smallFileBytes = 256 * 1024;
/** How many entries ahead small files are read (at most 4 MiB held). */
const readAheadFiles = 16;

/** One entry of `packTree`: a header, and the host file of a regular file. */
interface PackedEntry {
  header: Headers;
  file?: string | undefined;
  /** What it was when listed: inode, size, time and mode (`GrowingTreePacker`). */
  identity: string;
}

/** The entries below `relative`, in the order they are packed (names sorted, depth first). */
async function listTree(
  root: string,
  relative: string,
  options: PackTreeOptions,
  out: PackedEntry[],
): Promise<void> {
  const names = (await readdir(path.join(root, relative))).sort();
  const infos = await Promise.all(names.map((name) => lstat(path.join(root, relative, name))));
  for (const [index, name] of names.entries()) {
    const info = infos[index];
    if (!info) continue;
    const rel = relative ? `${relative}/${name}` : name;
    const entry = await entryOf(root, rel, info, options);
    if (!entry) continue;
    out.push(entry);
    if (info.isDirectory()) await listTree(root, rel, options, out);
  }
}

/** The entry of `rel` (below `root`) as `info` describes it; none for sockets and devices. */
async function entryOf(
  root: string,
  rel: string,
  info: Stats,
  options: PackTreeOptions,
): Promise<PackedEntry | undefined> {
  const full = path.join(root, rel);
  const base: Headers = {
    name: `${options.prefix ?? ""}${rel.split(path.sep).join("/")}`,
    mode: info.mode & 0o7777,
    mtime: info.mtime,
    ...(options.owner ? { uid: options.owner.uid, gid: options.owner.gid } : {}),
  };
  const identity = `${info.ino}:${info.size}:${info.mtimeMs}:${info.mode}`;
  if (info.isDirectory()) return { header: { ...base, type: "directory" }, identity };
  if (info.isSymbolicLink()) {
    return { header: { ...base, type: "symlink", linkname: await readlink(full) }, identity };
  }
  if (info.isFile())
    return { header: { ...base, type: "file", size: info.size }, file: full, identity };
  return undefined;
}

/** A small file's bytes, never through a link (the tree could change between list and read). */
async function readSmallFile(file: string): Promise<Buffer> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

export function addEntry(archive: Pack, header: Headers, data?: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (error?: Error | null): void => (error ? reject(error) : resolve());
    if (data)
      archive.entry(header, Buffer.from(data.buffer, data.byteOffset, data.byteLength), done);
    else archive.entry(header, done);
  });
}

async function addFile(archive: Pack, header: Headers, file: string): Promise<void> {
  let done!: Promise<void>;
  const entry = (() => {
    let settle!: (error?: Error | null) => void;
    done = new Promise<void>((resolve, reject) => {
      settle = (error) => (error ? reject(error) : resolve());
    });
    return archive.entry(header, settle);
  })();
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    let remaining = header.size ?? 0;
    const buffer = Buffer.alloc(64 * 1024);
    while (remaining > 0) {
      const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, remaining));
      if (bytesRead === 0) throw new SandboxError(`${file} shrank while being copied`);
      remaining -= bytesRead;
      if (!entry.write(Buffer.from(buffer.subarray(0, bytesRead)))) await once(entry, "drain");
    }
  } finally {
    await handle.close();
  }
  entry.end(undefined);
  await done;
}

/** streamx streams yield untyped chunks; a tar pack yields bytes. */
async function* bytesOf(source: AsyncIterable<unknown>): AsyncIterable<Uint8Array> {
  for await (const chunk of source) yield chunk as Uint8Array;
}

/**
 * Container directory → host directory. The container could have been made hostile, so its
 * archive is validated entry by entry before anything is written, into a fresh staging directory
 * that takes `hostDir`'s place only when the whole archive passed.
 */
export async function copyTreeOut(
  transport: ExecTransport,
  containerDir: string,
  hostDir: string,
  options: CopyTreeOutOptions = {},
): Promise<CopyTreeOutResult> {
  throwIfAborted(options.signal, "copying a tree out of the sandbox");
  const target = path.resolve(hostDir);
  await checkTargetFree(target);
  await mkdir(path.dirname(target), { recursive: true });
  const staging = await mkdtemp(
    path.join(path.dirname(target), `.${path.basename(target)}.cordon-`),
  );
  try {
    const result = await extractInto(transport, containerDir, staging, options);
    await rmdir(target).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "ENOENT") throw error;
    });
    await rename(staging, target);
    return result;
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    throw error;
  }
}

async function checkTargetFree(target: string): Promise<void> {
  try {
    const entries = await readdir(target);
    if (entries.length > 0) {
      throw new SandboxError(`cannot copy out to ${target}: the directory is not empty`, {
        fix: "choose a new directory, or remove this one first",
      });
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}

async function extractInto(
  transport: ExecTransport,
  containerDir: string,
  staging: string,
  options: CopyTreeOutOptions,
): Promise<CopyTreeOutResult> {
  const channel = new ChunkChannel();
  const stderr: Buffer[] = [];
  let stderrBytes = 0;
  const running = await transport.start({
    cmd: ["bash", "-c", 'cd -- "$1" && exec tar -c -f - .', "cordon", containerDir],
    env: ["LC_ALL=C"],
    onOutput: async (stream, chunk) => {
      if (stream === "stdout") {
        await channel.write(chunk).catch(() => undefined);
        return;
      }
      if (stderrBytes < maxStderrBytes) stderr.push(Buffer.from(chunk));
      stderrBytes += chunk.byteLength;
    },
  });
  const stop = (): void => {
    running.detach();
    channel.close();
  };
  const onAbort = (): void => stop();
  options.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const extraction = extractArchive(channel, staging, options).then(
      (result) => ({ result, error: undefined }),
      (error: unknown) => ({ result: undefined, error }),
    );
    const exited = running.exitCode.finally(() => channel.close());
    exited.catch(() => undefined);
    const outcome = await extraction.finally(stop);
    const status = await exited;
    throwIfAborted(options.signal, "copying a tree out of the sandbox");
    // A refused entry is the news, whatever cutting the archive short did to tar's status.
    if (outcome.error instanceof SandboxError) throw outcome.error;
    if (status !== 0) {
      throw fileErrorFrom({
        operation: "copy out",
        path: containerDir,
        status,
        stderr: Buffer.concat(stderr).toString("utf8"),
      });
    }
    if (outcome.error !== undefined) {
      throw outcome.error instanceof Error
        ? outcome.error
        : new SandboxError(`copying ${containerDir} out failed`, { cause: outcome.error });
    }
    if (!outcome.result) throw new SandboxError(`copying ${containerDir} out produced nothing`);
    return outcome.result;
  } finally {
    options.signal?.removeEventListener("abort", onAbort);
  }
}
