import { posix } from "node:path";

import { FileOperationError, type Logger } from "../../../common/index.js";
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
} from "../../sandbox.js";
import { scriptInvocation } from "../../shell/command-line.js";
import type { ExecTransport } from "../../shell/exec-transport.js";
import { fileErrorFrom } from "./file-errors.js";
import { SizedContent } from "./sized-content.js";
import {
  copyTreeIn,
  copyTreeOut,
  type CopyTreeOutOptions,
  type CopyTreeOutResult,
} from "./tree-transfer.js";
import { shellScript } from "../../shell/shell-scripts.js";

/** Messages must be the C locale's for the error mapping, whatever the image sets. */
const scriptEnv = ["LC_ALL=C"];

/**
 * The files of a `DockerSandbox`: every `SandboxFiles` operation, plus whole-tree transfers
 * between the host and the container. The transfers name a host path, so they are not part of
 * `SandboxFiles`: tools must never reach the host, and a `HostSandbox` has no second side to
 * copy to. Code that holds the `DockerSandbox` itself (workflows, tests) uses them.
 */
export interface DockerSandboxFiles extends SandboxFiles {
  /**
   * Copies the host directory `hostDir` into `containerDir` (created if missing) as a tar stream
   * through an exec's stdin, extracted by the container user.
   */
  copyTreeIn(hostDir: string, containerDir: string, options?: SignalOption): Promise<void>;
  /**
   * Copies `containerDir` out to the host directory `hostDir` (which must not exist, or be
   * empty). The archive comes from the container, so it is not trusted: every entry is checked
   * (no absolute or `..` names, no links leaving the tree, no devices, byte and entry caps) and
   * the tree is built in a staging directory that replaces `hostDir` only when all of it passed.
   */
  copyTreeOut(
    containerDir: string,
    hostDir: string,
    options?: CopyTreeOutOptions,
  ): Promise<CopyTreeOutResult>;
}

/**
 * File operations of a DockerSandbox: each one exec inside the container (or one request to its
 * resident executor), as the container user, running the file script with the paths as arguments.
 */
export class ContainerFiles implements DockerSandboxFiles {
  constructor(
    private readonly transport: ExecTransport,
    readonly workdir: string,
    private readonly logger: Logger,
  ) {}

  /** A sandbox path made absolute against the working directory; refuses what cannot be one. */
  resolve(path: string): string {
    if (path.includes("\0")) {
      throw new FileOperationError(`the path contains a NUL byte`, "other", path);
    }
    return posix.resolve(this.workdir, path);
  }

  async readFile(path: string, options: ReadFileOptions = {}): Promise<Uint8Array> {
    const abs = this.resolve(path);
    const max = options.maxBytes ?? defaultMaxReadBytes;
    const fast = await this.transport.fastFiles?.read(abs, max, options.signal);
    if (fast) {
      if (fast.byteLength > max) throw grewPastLimit(abs, max);
      return fast;
    }
    const content = new SizedContent(max);
    await this.#run("read", abs, [String(max)], options, undefined, (chunk) => content.push(chunk));
    if (content.overflowed) throw grewPastLimit(abs, max);
    return content.bytes();
  }

  async writeFile(
    path: string,
    data: string | Uint8Array,
    options: WriteFileOptions = {},
  ): Promise<void> {
    const abs = this.resolve(path);
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    const mode = (options.mode ?? 0o644) & 0o7777;
    const written = await this.transport.fastFiles?.write(
      abs,
      bytes,
      mode,
      options.createParents !== false,
      options.signal,
    );
    if (written) return;
    const parents = options.createParents === false ? "0" : "1";
    // The size lets the script tell a complete upload from one cut short by an abort.
    await this.#run(
      "write",
      abs,
      [mode.toString(8), parents, String(bytes.byteLength)],
      options,
      bytes,
    );
  }

  async stat(path: string, options: SignalOption = {}): Promise<FileStat | undefined> {
    const abs = this.resolve(path);
    const line = (
      (await this.transport.fastFiles?.stat(abs, options.signal)) ??
      (await this.#run("stat", abs, [], options)).stdout.toString("utf8")
    ).trim();
    if (line === "none") return undefined;
    const [kind = "", size = "0", mode = "0", mtime = "0"] = line.split("|");
    return {
      path: abs,
      type: kind === "dangling" ? "symlink" : typeOfStatKind(kind),
      size: Number(size),
      mode: Number.parseInt(mode, 8) & 0o7777,
      mtimeMs: Math.round(Number(mtime) * 1000),
    };
  }

  async list(path: string, options: ListOptions = {}): Promise<ListResult> {
    const abs = this.resolve(path);
    const depth = Math.max(1, Math.floor(options.depth ?? 1));
    const limit = Math.max(0, Math.floor(options.limit ?? defaultListLimit));
    const result = await this.#run("list", abs, [String(depth), String(limit)], options);
    const entries: DirEntry[] = [];
    for (const record of result.stdout.toString("utf8").split("\0")) {
      if (record === "") continue;
      // name TAB type TAB size; a name may itself hold tabs, the other fields cannot.
      const sizeAt = record.lastIndexOf("\t");
      const typeAt = record.lastIndexOf("\t", sizeAt - 1);
      if (typeAt < 0) continue;
      entries.push({
        name: record.slice(0, typeAt),
        type: typeOfFindLetter(record.slice(typeAt + 1, sizeAt)),
        size: Number(record.slice(sizeAt + 1)),
      });
    }
    const truncated = entries.length > limit;
    return { entries: truncated ? entries.slice(0, limit) : entries, truncated };
  }

  async mkdir(path: string, options: SignalOption = {}): Promise<void> {
    await this.#run("mkdir", this.resolve(path), [], options);
  }

  async remove(path: string, options: RemoveOptions = {}): Promise<void> {
    await this.#run("remove", this.resolve(path), [options.recursive ? "1" : "0"], options);
  }

  async rename(from: string, to: string, options: SignalOption = {}): Promise<void> {
    await this.#run("rename", this.resolve(from), [this.resolve(to)], options);
  }

  copyTreeIn(hostDir: string, containerDir: string, options: SignalOption = {}): Promise<void> {
    return copyTreeIn(this.transport, hostDir, this.resolve(containerDir), options);
  }

  copyTreeOut(
    containerDir: string,
    hostDir: string,
    options: CopyTreeOutOptions = {},
  ): Promise<CopyTreeOutResult> {
    return copyTreeOut(this.transport, this.resolve(containerDir), hostDir, options);
  }

  async #run(
    operation: string,
    path: string,
    args: string[],
    options: SignalOption,
    stdin?: Uint8Array,
    onStdout?: (chunk: Uint8Array) => void,
  ): Promise<{ stdout: Buffer }> {
    const invocation = scriptInvocation(shellScript("fileOperations"), [operation, path, ...args]);
    const result = await this.transport.run(
      {
        cmd: invocation.cmd,
        env: [...invocation.env, ...scriptEnv],
        stdin,
        onStdout,
      },
      options.signal,
    );
    if (result.exitCode !== 0) {
      const error = fileErrorFrom({
        operation,
        path,
        status: result.exitCode,
        stderr: result.stderr.toString("utf8"),
      });
      this.logger.debug({ operation, path, reason: error.reason }, "file operation failed");
      throw error;
    }
    return result;
  }
}

function grewPastLimit(path: string, max: number): FileOperationError {
  return new FileOperationError(
    `cannot read ${path}: it grew past ${max} bytes while being read`,
    "too_large",
    path,
  );
}

function typeOfStatKind(kind: string): FileType {
  if (kind === "regular file" || kind === "regular empty file") return "file";
  if (kind === "directory") return "directory";
  if (kind === "symbolic link") return "symlink";
  return "other";
}

function typeOfFindLetter(letter: string): FileType {
  if (letter === "f") return "file";
  if (letter === "d") return "directory";
  if (letter === "l") return "symlink";
  return "other";
}
