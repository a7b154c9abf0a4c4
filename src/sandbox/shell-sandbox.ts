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
} from "./sandbox.js";
import { runCommand, type CommandContext } from "./shell/run-command.js";
import { ScriptProcessTable } from "./shell/script-process-table.js";

/** The file half of a `Sandbox`: what a backend's file helper implements. */
export type SandboxFiles = Pick<
  Sandbox,
  "readFile" | "writeFile" | "stat" | "list" | "mkdir" | "remove" | "rename"
>;

export interface ShellSandboxParts {
  /** How commands run: the transport, the working-directory rules, where logs go. */
  commands: CommandContext;
  files: SandboxFiles;
  /** Where background processes keep their directories (in the sandbox's view). */
  processDirectory: string;
}

/**
 * A `Sandbox` made of three parts, as E2B's `sandbox.commands` / `sandbox.files`: `exec` is
 * `runCommand` over the backend's transport (one implementation of stop, timeout, tree kill,
 * output caps and OOM for every backend), `files` the backend's file helper, `processes` the
 * script process table over the same transport. A backend (`DockerSandbox`, `HostSandbox`) only
 * builds the parts.
 */
export abstract class ShellSandbox implements Sandbox {
  abstract readonly id: string;
  abstract readonly kind: Sandbox["kind"];
  readonly workdir: string;
  readonly files: SandboxFiles;
  readonly processes: ProcessTable;
  readonly #commands: CommandContext;

  protected constructor(parts: ShellSandboxParts) {
    this.#commands = parts.commands;
    this.workdir = parts.commands.workdir;
    this.files = parts.files;
    this.processes = new ScriptProcessTable({
      runner: parts.commands.transport,
      workdir: parts.commands.workdir,
      root: parts.commands.root,
      directory: parts.processDirectory,
      logger: parts.commands.logger,
    });
  }

  exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    return runCommand(this.#commands, command, options);
  }

  readFile(path: string, options?: ReadFileOptions): Promise<Uint8Array> {
    return this.files.readFile(path, options);
  }

  writeFile(path: string, data: string | Uint8Array, options?: WriteFileOptions): Promise<void> {
    return this.files.writeFile(path, data, options);
  }

  stat(path: string, options?: SignalOption): Promise<FileStat | undefined> {
    return this.files.stat(path, options);
  }

  list(path: string, options?: ListOptions): Promise<ListResult> {
    return this.files.list(path, options);
  }

  mkdir(path: string, options?: SignalOption): Promise<void> {
    return this.files.mkdir(path, options);
  }

  remove(path: string, options?: RemoveOptions): Promise<void> {
    return this.files.remove(path, options);
  }

  rename(from: string, to: string, options?: SignalOption): Promise<void> {
    return this.files.rename(from, to, options);
  }
}
