import { randomBytes } from "node:crypto";
import { constants, type Stats } from "node:fs";
import { lstat, mkdir, open, readdir, rename, rm, rmdir, stat, unlink } from "node:fs/promises";
import path from "node:path";

import { FileOperationError, throwIfAborted } from "../../common/index.js";
import {
  defaultListLimit,
  defaultMaxReadBytes,
  type DirEntry,
  type FileStat,
  type FileType,
  type ListOptions,
  type ListResult,
  type ReadFileOptions,
  type RemoveOptions,
  type SandboxFiles,
  type SignalOption,
  type WriteFileOptions,
} from "../sandbox.js";
import { errnoOf, fileError, type ConfinedPaths } from "./confined-paths.js";

/** A listing never gathers more than this, whatever the limit (it sorts what it gathered). */
const maxGathered = 500_000;

/** File operations of the host backend: Node's fs on confined, resolved paths. */
export class HostFiles implements SandboxFiles {
  constructor(private readonly paths: ConfinedPaths) {}

  async readFile(input: string, options: ReadFileOptions = {}): Promise<Uint8Array> {
    throwIfAborted(options.signal, `reading ${input}`);
    const real = await this.paths.follow(this.paths.lexical(input, { reading: true }), {
      reading: true,
    });
    const max = options.maxBytes ?? defaultMaxReadBytes;
    let handle;
    try {
      // NONBLOCK: opening a fifo must not hang; NOFOLLOW: the path was resolved already.
      handle = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (error) {
      throw fileError(error, input, "read");
    }
    try {
      const info = await handle.stat();
      checkReadable(info, input);
      if (info.size > max) {
        throw new FileOperationError(
          `${input} is ${info.size} bytes, over the limit of ${max}`,
          "too_large",
          input,
        );
      }
      const buffer = Buffer.alloc(Math.min(info.size, max) + 1);
      let length = 0;
      for (;;) {
        const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
        if (bytesRead === 0) break;
        length += bytesRead;
        if (length > max) {
          throw new FileOperationError(
            `${input} grew past ${max} bytes while being read`,
            "too_large",
            input,
          );
        }
        if (length === buffer.length) break;
      }
      return new Uint8Array(buffer.buffer, buffer.byteOffset, length);
    } catch (error) {
      throw fileError(error, input, "read");
    } finally {
      await handle.close();
    }
  }

  async writeFile(
    input: string,
    data: string | Uint8Array,
    options: WriteFileOptions = {},
  ): Promise<void> {
    throwIfAborted(options.signal, `writing ${input}`);
    const target = await this.#writeTarget(input);
    const directory = path.dirname(target);
    try {
      const parent = await stat(directory).catch((error: unknown) => {
        if (errnoOf(error) !== "ENOENT") throw error;
        return undefined;
      });
      if (!parent) {
        if (options.createParents === false) {
          throw new FileOperationError(
            `cannot write ${input}: ${path.dirname(input)} does not exist`,
            "not_found",
            input,
          );
        }
        await mkdir(directory, { recursive: true });
      } else if (!parent.isDirectory()) {
        throw new FileOperationError(
          `cannot write ${input}: ${directory} is not a directory`,
          "not_directory",
          input,
        );
      }
      const existing = await stat(target).catch(() => undefined);
      if (existing?.isDirectory())
        throw new FileOperationError(`${input} is a directory`, "is_directory", input);
      const mode = existing ? existing.mode & 0o7777 : (options.mode ?? 0o644) & 0o7777;
      // Temp file + rename: readers see the old or the new file, never a mix, and a hard link to
      // the old file (inside or out) is left untouched instead of written through.
      const temp = path.join(directory, `.cordon-write.${randomBytes(6).toString("hex")}`);
      const handle = await open(
        temp,
        constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
        0o600,
      );
      try {
        await handle.writeFile(typeof data === "string" ? Buffer.from(data) : data);
        await handle.chmod(mode);
      } catch (error) {
        await handle.close();
        await unlink(temp).catch(() => undefined);
        throw error;
      }
      await handle.close();
      await rename(temp, target).catch(async (error: unknown) => {
        await unlink(temp).catch(() => undefined);
        throw error;
      });
    } catch (error) {
      throw fileError(error, input, "write");
    }
  }

  async stat(input: string, options: SignalOption = {}): Promise<FileStat | undefined> {
    throwIfAborted(options.signal, `stat of ${input}`);
    const abs = this.paths.lexical(input, { reading: true });
    let real: string;
    try {
      real = await this.paths.follow(abs, { reading: true });
    } catch (error) {
      if (
        error instanceof FileOperationError &&
        (error.reason === "not_found" || error.reason === "not_directory")
      ) {
        return undefined;
      }
      throw error;
    }
    let info: Stats;
    try {
      info = await stat(real);
    } catch (error) {
      const code = errnoOf(error);
      if (code !== "ENOENT" && code !== "ENOTDIR") throw fileError(error, input, "stat");
      // Missing; but a dangling link is something, and stat(2) semantics report it as a link.
      const own = await lstat(abs).catch(() => undefined);
      if (!own?.isSymbolicLink()) return undefined;
      info = own;
    }
    return {
      path: abs,
      type: typeOf(info),
      size: info.size,
      mode: info.mode & 0o7777,
      mtimeMs: Math.round(info.mtimeMs),
    };
  }

  async list(input: string, options: ListOptions = {}): Promise<ListResult> {
    throwIfAborted(options.signal, `listing ${input}`);
    const real = await this.paths.follow(this.paths.lexical(input, { reading: true }), {
      reading: true,
    });
    const depth = Math.max(1, Math.floor(options.depth ?? 1));
    const limit = Math.max(0, Math.floor(options.limit ?? defaultListLimit));
    let info: Stats;
    try {
      info = await stat(real);
    } catch (error) {
      throw fileError(error, input, "list");
    }
    if (!info.isDirectory())
      throw new FileOperationError(`${input} is not a directory`, "not_directory", input);
    const gathered: DirEntry[] = [];
    let cut = false;
    const walk = async (relative: string, level: number): Promise<void> => {
      let children;
      try {
        children = await readdir(path.join(real, relative), { withFileTypes: true });
      } catch (error) {
        // The listed directory itself must be readable; deeper ones are skipped, like find does.
        if (relative === "") throw fileError(error, input, "list");
        return;
      }
      for (const child of children) {
        throwIfAborted(options.signal, `listing ${input}`);
        if (gathered.length >= maxGathered) {
          cut = true;
          return;
        }
        const name = relative ? `${relative}/${child.name}` : child.name;
        const own = await lstat(path.join(real, name)).catch(() => undefined);
        if (!own) continue;
        gathered.push({ name, type: typeOf(own), size: own.size });
        if (own.isDirectory() && level < depth) await walk(name, level + 1);
      }
    };
    await walk("", 1);
    // Byte order, as the container's `sort` in the C locale gives.
    gathered.sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
    const truncated = cut || gathered.length > limit;
    return { entries: gathered.slice(0, limit), truncated };
  }

  async mkdir(input: string, options: SignalOption = {}): Promise<void> {
    throwIfAborted(options.signal, `mkdir ${input}`);
    const real = await this.paths.follow(this.paths.lexical(input));
    try {
      const existing = await stat(real).catch(() => undefined);
      if (existing && !existing.isDirectory()) {
        throw new FileOperationError(
          `${input} exists and is not a directory`,
          "not_directory",
          input,
        );
      }
      await mkdir(real, { recursive: true });
    } catch (error) {
      throw fileError(error, input, "create directory");
    }
  }

  async remove(input: string, options: RemoveOptions = {}): Promise<void> {
    throwIfAborted(options.signal, `removing ${input}`);
    const entry = await this.paths.entry(this.paths.lexical(input));
    try {
      const own = await lstat(entry);
      if (own.isDirectory()) {
        if (options.recursive) await rm(entry, { recursive: true });
        else await rmdir(entry);
      } else {
        await unlink(entry);
      }
    } catch (error) {
      throw fileError(error, input, "remove");
    }
  }

  async rename(from: string, to: string, options: SignalOption = {}): Promise<void> {
    throwIfAborted(options.signal, `renaming ${from}`);
    const source = await this.paths.entry(this.paths.lexical(from));
    const destination = await this.paths.entry(this.paths.lexical(to));
    try {
      await lstat(source);
      await rename(source, destination);
    } catch (error) {
      throw fileError(error, from, "rename");
    }
  }

  /** Where a write lands: the entry itself, or the target of a link at the entry (checked). */
  async #writeTarget(input: string): Promise<string> {
    const abs = this.paths.lexical(input);
    const entry = await this.paths.entry(abs);
    const own = await lstat(entry).catch(() => undefined);
    if (own?.isSymbolicLink()) return this.paths.follow(abs);
    // A hard-linked file is replaced by the rename, so its other links keep the old content:
    // a write never reaches through a link to outside the root.
    return entry;
  }
}

/** Regular files only, and none with other hard links: one could be a way out of the root. */
function checkReadable(info: Stats, input: string): void {
  if (info.isDirectory())
    throw new FileOperationError(`${input} is a directory`, "is_directory", input);
  if (!info.isFile()) {
    throw new FileOperationError(
      `${input} is not a regular file (a device, fifo or socket)`,
      "other",
      input,
    );
  }
  if (info.nlink > 1) {
    throw new FileOperationError(
      `${input} has other hard links, which may lie outside the workspace; it is not read`,
      "outside_sandbox",
      input,
      { fix: "copy the file's content into the workspace under a new name, or read it with exec" },
    );
  }
}

function typeOf(info: Stats): FileType {
  if (info.isFile()) return "file";
  if (info.isDirectory()) return "directory";
  if (info.isSymbolicLink()) return "symlink";
  return "other";
}
