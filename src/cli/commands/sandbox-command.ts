import type { Command } from "commander";

import type { CliContext } from "../context.js";
import { registerSandboxListCommand } from "./sandbox-list.js";
import { registerSandboxPruneCommand } from "./sandbox-prune.js";
import { registerSandboxRmCommand } from "./sandbox-rm.js";

/**
 * The `cordon sandbox` parent command. Several files add subcommands to it, so whichever
 * registers first creates it and the others find it.
 */
export function sandboxCommand(program: Command): Command {
  return (
    program.commands.find((command) => command.name() === "sandbox") ??
    program
      .command("sandbox")
      .description("the Docker sandboxes cordon manages: one container per scope key")
  );
}

/** `cordon sandbox list | rm | prune`. */
export function registerSandboxCommands(program: Command, context: CliContext): void {
  const sandbox = sandboxCommand(program);
  registerSandboxListCommand(sandbox, context);
  registerSandboxRmCommand(sandbox, context);
  registerSandboxPruneCommand(sandbox, context);
}
