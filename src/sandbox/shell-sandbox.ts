import type { ExecOptions, ExecResult, ProcessTable, Sandbox, SandboxFiles } from "./sandbox.js";
import { runCommand, type CommandContext } from "./shell/run-command.js";
import { ScriptProcessTable } from "./shell/script-process-table.js";

export interface ShellSandboxParts<Files extends SandboxFiles> {
  /** How commands run: the transport, the working-directory rules, where logs go. */
  commands: CommandContext;
  files: Files;
  /** Where background processes keep their directories (in the sandbox's view). */
  processDirectory: string;
}

/**
 * A `Sandbox` made of three parts, as E2B's `sandbox.commands` / `sandbox.files`: `exec` is
 * `runCommand` over the backend's transport (one implementation of stop, timeout, tree kill,
 * output caps and OOM for every backend), `files` the backend's file helper, `processes` the
 * script process table over the same transport. A backend (`DockerSandbox`, `HostSandbox`) only
 * builds the parts; `Files` lets a backend offer more file operations than every sandbox has
 * (the Docker sandbox's tree transfers).
 */
export abstract class ShellSandbox<Files extends SandboxFiles = SandboxFiles> implements Sandbox {
  abstract readonly id: string;
  abstract readonly kind: Sandbox["kind"];
  readonly workdir: string;
  readonly files: Files;
  readonly processes: ProcessTable;
  readonly #commands: CommandContext;

  protected constructor(parts: ShellSandboxParts<Files>) {
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
}
