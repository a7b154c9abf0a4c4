import { createSilentLogger, type Logger, type SandboxError } from "../../common/index.js";
import type {
  ExecOptions,
  ExecResult,
  FileStat,
  ListOptions,
  ListResult,
  ProcessTable,
  ReadFileOptions,
  RemoveOptions,
  Sandbox,
  SignalOption,
  WriteFileOptions,
} from "../sandbox.js";
import type { DockerEngine } from "./engine.js";
import { ContainerExec } from "./exec/container-exec.js";
import type { ExecTransport } from "./exec/exec-transport.js";
import { runCommand } from "./exec/run-command.js";
import { ContainerFiles } from "./files/container-files.js";
import {
  copyTreeIn,
  copyTreeOut,
  type CopyTreeOutOptions,
  type CopyTreeOutResult,
} from "./files/tree-transfer.js";
import { ScriptProcessTable } from "../shell/script-process-table.js";
import { ResidentTransport } from "./resident/resident-transport.js";

/** Where background processes live inside the container. */
const containerProcessDirectory = "/tmp/.cordon/proc";

export interface DockerSandboxOptions {
  engine: DockerEngine;
  /** The running container's id. */
  containerId: string;
  /** Its name; also the sandbox id. */
  containerName: string;
  /** Where relative paths resolve and commands start, e.g. "/workspace". */
  workdir: string;
  /** "uid:gid" every command and file operation runs as. */
  user: string;
  /**
   * Replaces the container when it went away mid-session (the manager's `recover`), so the next
   * call after a killed container gets a fresh one instead of failing for the rest of the run.
   */
  recover?: ((options?: { signal?: AbortSignal | undefined }) => Promise<string>) | undefined;
  /**
   * Why the manager stopped the container on purpose (it wrote past its disk budget), if it did:
   * a command cut off by that stop fails with this error instead of a generic "stopped" one.
   */
  stopReason?: (() => SandboxError | undefined) | undefined;
  logger?: Logger | undefined;
  /**
   * "resident": calls go through a resident executor in the container (the container must have
   * been created with it mounted: `sandbox.docker.executor`), falling back to plain exec when it
   * is not running. "exec" (default here): one Docker exec per call.
   */
  executor?: "resident" | "exec" | undefined;
}

/**
 * A `Sandbox` in a running Docker container. Every command and every file operation is an exec
 * inside the container as the container's user, so read-only mounts, tmpfs, permissions and
 * symlinks are what the container's kernel says they are; no host path is ever touched. The
 * manager creates the container; this object only uses it.
 */
export class DockerSandbox implements Sandbox {
  readonly id: string;
  readonly kind = "docker" as const;
  readonly workdir: string;
  readonly processes: ProcessTable;
  readonly #transport: ExecTransport;
  readonly #files: ContainerFiles;
  readonly #logger: Logger;

  constructor(options: DockerSandboxOptions) {
    this.id = options.containerName;
    this.workdir = options.workdir;
    this.#logger = (options.logger ?? createSilentLogger()).child({
      sandbox: options.containerName,
    });
    const recover = options.recover;
    const plainExec = new ContainerExec(
      options.engine.containers,
      options.containerId,
      options.containerName,
      options.user,
      { recover: recover && (() => recover()), stopReason: options.stopReason },
    );
    this.#transport =
      options.executor === "resident" ? new ResidentTransport(plainExec, this.#logger) : plainExec;
    this.#files = new ContainerFiles(this.#transport, options.workdir, this.#logger);
    this.processes = new ScriptProcessTable({
      runner: this.#transport,
      workdir: options.workdir,
      root: "/",
      directory: containerProcessDirectory,
      logger: this.#logger,
    });
  }

  exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    return runCommand(
      { transport: this.#transport, workdir: this.workdir, logger: this.#logger },
      command,
      options,
    );
  }

  readFile(path: string, options?: ReadFileOptions): Promise<Uint8Array> {
    return this.#files.readFile(path, options);
  }

  writeFile(path: string, data: string | Uint8Array, options?: WriteFileOptions): Promise<void> {
    return this.#files.writeFile(path, data, options);
  }

  stat(path: string, options?: SignalOption): Promise<FileStat | undefined> {
    return this.#files.stat(path, options);
  }

  list(path: string, options?: ListOptions): Promise<ListResult> {
    return this.#files.list(path, options);
  }

  mkdir(path: string, options?: SignalOption): Promise<void> {
    return this.#files.mkdir(path, options);
  }

  remove(path: string, options?: RemoveOptions): Promise<void> {
    return this.#files.remove(path, options);
  }

  rename(from: string, to: string, options?: SignalOption): Promise<void> {
    return this.#files.rename(from, to, options);
  }

  /**
   * Copies the host directory `hostDir` into `containerDir` (created if missing) as a tar stream
   * through an exec's stdin, extracted by the container user.
   */
  copyTreeIn(hostDir: string, containerDir: string, options: SignalOption = {}): Promise<void> {
    return copyTreeIn(this.#transport, hostDir, this.#files.resolve(containerDir), options);
  }

  /**
   * Copies `containerDir` out to the host directory `hostDir` (which must not exist, or be
   * empty). The archive comes from the container, so it is not trusted: every entry is checked
   * (no absolute or `..` names, no links leaving the tree, no devices, byte and entry caps) and
   * the tree is built in a staging directory that replaces `hostDir` only when all of it passed.
   */
  copyTreeOut(
    containerDir: string,
    hostDir: string,
    options: CopyTreeOutOptions = {},
  ): Promise<CopyTreeOutResult> {
    return copyTreeOut(this.#transport, this.#files.resolve(containerDir), hostDir, options);
  }
}
