import { once } from "node:events";
import { constants } from "node:fs";
import {
  link,
  lstat,
  mkdir,
  mkdtemp,
  open,
  readdir,
  readlink,
  realpath,
  rename,
  rm,
  rmdir,
  symlink,
} from "node:fs/promises";
import path from "node:path";

import { extract, pack, type Header, type Pack } from "tar-stream";

import { SandboxError, throwIfAborted } from "../../../common/index.js";
import type { SignalOption } from "../../sandbox.js";
import type { ContainerExec } from "../exec/container-exec.js";
import { ChunkChannel } from "../exec/chunk-channel.js";
import { fileErrorFrom } from "./file-errors.js";

export interface CopyTreeOutOptions extends SignalOption {
  /** Refuse the archive once its files add up to more bytes than this. Default 1 GiB. */
  maxBytes?: number | undefined;
  /** Refuse the archive once it has more entries than this. Default 100 000. */
  maxEntries?: number | undefined;
}

export interface CopyTreeOutResult {
  /** Entries written on the host (directories included). */
  entries: number;
  /** File bytes written. */
  bytes: number;
}

type Headers = Partial<Header> & Pick<Header, "name">;

const defaultMaxBytes = 1024 ** 3;
const defaultMaxEntries = 100_000;
const maxStderrBytes = 64 * 1024;

/** Host directory → container directory, as a tar stream through the stdin of `tar -x`. */
export async function copyTreeIn(
  transport: ContainerExec,
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

/** Packs `root` in a stable order; sockets and devices are skipped, symlinks kept as links. */
async function packTree(archive: Pack, root: string, relative = ""): Promise<void> {
  const names = (await readdir(path.join(root, relative))).sort();
  for (const name of names) {
    const rel = relative ? `${relative}/${name}` : name;
    const full = path.join(root, rel);
    const info = await lstat(full);
    const base: Headers = { name: rel, mode: info.mode & 0o7777, mtime: info.mtime };
    if (info.isDirectory()) {
      await addEntry(archive, { ...base, type: "directory" });
      await packTree(archive, root, rel);
    } else if (info.isSymbolicLink()) {
      await addEntry(archive, { ...base, type: "symlink", linkname: await readlink(full) });
    } else if (info.isFile()) {
      await addFile(archive, { ...base, type: "file", size: info.size }, full);
    }
  }
}

function addEntry(archive: Pack, header: Headers): Promise<void> {
  return new Promise((resolve, reject) => {
    archive.entry(header, (error) => (error ? reject(error) : resolve()));
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

/** What was made in the staging directory so far: a name's type decides what may go under it. */
type Made = "directory" | "file" | "symlink";

/**
 * Container directory → host directory. The container could have been made hostile, so its
 * archive is validated entry by entry before anything is written, into a fresh staging directory
 * that takes `hostDir`'s place only when the whole archive passed.
 */
export async function copyTreeOut(
  transport: ContainerExec,
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
  transport: ContainerExec,
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

/**
 * Extracts a tar stream into `staging` (an empty directory), trusting nothing in it: names must
 * be relative without `..`; only directories, regular files, hard links to earlier files and
 * symbolic links that stay inside are accepted; parents must be directories this extraction
 * made; byte and entry caps hold. Throws `SandboxError` on the first entry that fails; what was
 * written by then stays in `staging` for the caller to remove.
 */
export async function extractArchive(
  source: AsyncIterable<Uint8Array>,
  staging: string,
  limits: { maxBytes?: number | undefined; maxEntries?: number | undefined } = {},
): Promise<CopyTreeOutResult> {
  const maxBytes = limits.maxBytes ?? defaultMaxBytes;
  const maxEntries = limits.maxEntries ?? defaultMaxEntries;
  const made = new Map<string, Made>([["", "directory"]]);
  const symlinks: string[] = [];
  let bytes = 0;
  let entries = 0;
  const refuse = (name: string, why: string): SandboxError =>
    new SandboxError(`refused the archive from the sandbox: entry ${JSON.stringify(name)} ${why}`, {
      fix: "nothing was copied; remove the offending entry inside the sandbox and copy again",
    });

  const archive = extract();
  const closed = once(archive, "close").catch(() => undefined);
  const feeding = (async () => {
    for await (const chunk of source) {
      if (archive.destroyed) return;
      if (!archive.write(chunk)) await Promise.race([once(archive, "drain"), closed]);
    }
    if (!archive.destroyed) archive.end(undefined);
  })();
  feeding.catch(() => undefined);

  try {
    for await (const entry of archive) {
      const header = entry.header;
      const name = checkedName(header.name, refuse);
      if (name === "") {
        entry.resume();
        continue;
      }
      if (++entries > maxEntries) throw refuse(name, `is past the limit of ${maxEntries} entries`);
      if (made.has(name)) throw refuse(name, "appears twice");
      const parent = parentOf(name);
      await ensureParents(parent, made, staging, (why) => refuse(name, why));
      const destination = path.join(staging, name);
      switch (header.type) {
        case "directory":
          await mkdir(destination, { mode: (header.mode & 0o777) | 0o700 });
          made.set(name, "directory");
          entry.resume();
          break;
        case "file":
        case "contiguous-file": {
          if (bytes + header.size > maxBytes) {
            throw refuse(name, `is past the limit of ${maxBytes} bytes`);
          }
          bytes += header.size;
          await writeEntry(entry, destination, header.mode & 0o777);
          made.set(name, "file");
          break;
        }
        case "symlink": {
          const linkname = header.linkname;
          if (path.posix.isAbsolute(linkname) || linkname.includes("\0")) {
            throw refuse(name, `is a symbolic link to an absolute path (${linkname})`);
          }
          const resolved = path.posix.normalize(path.posix.join(parent, linkname));
          if (resolved === ".." || resolved.startsWith("../")) {
            throw refuse(name, `is a symbolic link leaving the tree (${linkname})`);
          }
          await symlink(linkname, destination);
          made.set(name, "symlink");
          symlinks.push(name);
          entry.resume();
          break;
        }
        case "link": {
          const source = checkedName(header.linkname, refuse);
          if (made.get(source) !== "file") {
            throw refuse(name, `is a hard link to ${JSON.stringify(source)}, not an earlier file`);
          }
          await link(path.join(staging, source), destination);
          made.set(name, "file");
          entry.resume();
          break;
        }
        default:
          throw refuse(name, `is a ${header.type}, which is never copied out`);
      }
    }
    await feeding;
  } finally {
    archive.destroy();
  }
  await checkSymlinksStayInside(staging, symlinks, refuse);
  return { entries, bytes };
}

function parentOf(name: string): string {
  const parent = path.posix.dirname(name);
  return parent === "." ? "" : parent;
}

/** A tar name as a clean relative path ("" for the root); anything else is refused. */
function checkedName(raw: string, refuse: (name: string, why: string) => SandboxError): string {
  if (raw.includes("\0")) throw refuse(raw, "has a NUL byte in its name");
  if (raw.startsWith("/")) throw refuse(raw, "has an absolute name");
  const parts = raw.split("/").filter((part) => part !== "" && part !== ".");
  if (parts.includes("..")) throw refuse(raw, "has a '..' in its name");
  return parts.join("/");
}

/** Parents must be directories this extraction made (made here when the archive skipped them). */
async function ensureParents(
  parent: string,
  made: Map<string, Made>,
  staging: string,
  refuse: (why: string) => SandboxError,
): Promise<void> {
  if (parent === "") return;
  const kind = made.get(parent);
  if (kind === "directory") return;
  if (kind !== undefined) throw refuse(`lies under ${JSON.stringify(parent)}, which is a ${kind}`);
  await ensureParents(parentOf(parent), made, staging, refuse);
  await mkdir(path.join(staging, parent), { mode: 0o755 });
  made.set(parent, "directory");
}

async function writeEntry(
  entry: AsyncIterable<unknown>,
  destination: string,
  mode: number,
): Promise<void> {
  // O_EXCL: never follows or overwrites anything already there.
  const handle = await open(
    destination,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    mode,
  );
  try {
    for await (const chunk of entry) await handle.write(chunk as Uint8Array);
  } finally {
    await handle.close();
  }
}

/**
 * Each symlink must resolve (on the host, now that the tree exists) inside the staging
 * directory. A chain of links can leave a tree that every single link stays inside lexically,
 * so this checks the real resolution; a dangling link must resolve inside as far as it exists
 * and have no `..` after that.
 */
async function checkSymlinksStayInside(
  staging: string,
  symlinks: readonly string[],
  refuse: (name: string, why: string) => SandboxError,
): Promise<void> {
  const root = await realpath(staging);
  const inside = (candidate: string): boolean =>
    candidate === root || candidate.startsWith(`${root}${path.sep}`);
  for (const name of symlinks) {
    const full = path.join(staging, name);
    try {
      if (!inside(await realpath(full)))
        throw refuse(name, "is a symbolic link that resolves outside the tree");
      continue;
    } catch (error) {
      if (error instanceof SandboxError) throw error;
    }
    const target = path.join(path.dirname(full), await readlink(full));
    let existing = target;
    const rest: string[] = [];
    while (existing !== path.dirname(existing)) {
      const found = await lstat(existing).then(
        () => true,
        () => false,
      );
      if (found) break;
      rest.unshift(path.basename(existing));
      existing = path.dirname(existing);
    }
    const resolved = await realpath(existing).catch(() => "");
    if (!inside(resolved) || rest.includes("..")) {
      throw refuse(name, "is a symbolic link that resolves outside the tree");
    }
  }
}
