import { mkdir, mkdtemp, realpath, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { createSilentLogger, SandboxError, type Logger } from "../../common/index.js";
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
import { ScriptProcessTable } from "../shell/script-process-table.js";
import { ConfinedPaths } from "./confined-paths.js";
import { HostScriptRunner, runHostCommand, type HostExecContext } from "./host-exec.js";
import { HostFiles } from "./host-files.js";

export interface HostSandboxOptions {
  /** The workspace: every path must stay inside it; commands start in it. */
  root: string;
  /** Declared environment for commands, on top of PATH, HOME (= root), LANG and TERM. */
  env?: Record<string, string> | undefined;
  /**
   * Private directory for exec logs, pid files and background processes; created when missing.
   * Default: a fresh directory under the system temp directory.
   */
  stateDirectory?: string | undefined;
  /** Where PATH, LANG and TERM come from; default the current process's environment. */
  hostEnv?: NodeJS.ProcessEnv | undefined;
  logger?: Logger | undefined;
}

/**
 * The `Sandbox` of mode off: tools work on the host, confined to the workspace root (`..`,
 * absolute paths elsewhere, symlink escapes at any component and reads of hard-linked files are
 * refused), and commands run with bash in the workspace with a scrubbed environment, their whole
 * process tree killed on timeout or abort. For trusted use only: a command can still reach
 * anything the user can (DESIGN.md §4).
 */
export class HostSandbox implements Sandbox {
  readonly id = "host";
  readonly kind = "host" as const;
  readonly workdir: string;
  readonly processes: ProcessTable;
  readonly #files: HostFiles;
  readonly #context: HostExecContext;

  private constructor(context: HostExecContext) {
    this.#context = context;
    this.workdir = context.paths.root;
    this.#files = new HostFiles(context.paths);
    this.processes = new ScriptProcessTable({
      runner: new HostScriptRunner(context),
      workdir: context.paths.root,
      root: context.paths.root,
      directory: path.join(context.stateDirectory, "proc"),
      logger: context.logger,
    });
  }

  static async create(options: HostSandboxOptions): Promise<HostSandbox> {
    let root: string;
    try {
      root = await realpath(path.resolve(options.root));
      if (!(await stat(root)).isDirectory()) throw new Error("not a directory");
    } catch (error) {
      throw new SandboxError(`the workspace ${options.root} is not a directory that exists`, {
        cause: error,
        fix: "create the workspace directory, or set the agent's workspace in the config",
      });
    }
    const stateDirectory = options.stateDirectory
      ? path.resolve(options.stateDirectory)
      : await mkdtemp(path.join(tmpdir(), "cordon-host-"));
    await mkdir(path.join(stateDirectory, "logs"), { recursive: true, mode: 0o700 });
    const realState = await realpath(stateDirectory);
    const host = options.hostEnv ?? process.env;
    const env: Record<string, string> = {
      PATH: host["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
      HOME: root,
      LANG: host["LANG"] ?? "C.UTF-8",
      TERM: host["TERM"] ?? "dumb",
      ...options.env,
    };
    const logger = (options.logger ?? createSilentLogger()).child({ sandbox: "host" });
    return new HostSandbox({
      // Exec logs are the one place outside the root the file tools may read.
      paths: new ConfinedPaths(root, [path.join(realState, "logs")]),
      env,
      stateDirectory: realState,
      logger,
    });
  }

  exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    return runHostCommand(this.#context, command, options);
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
}
