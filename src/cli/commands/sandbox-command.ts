import type { Command } from "commander";

/**
 * The `sandbox` parent command, created once: several files register subcommands on it
 * (explain, list, rm, prune), whichever runs first creates it.
 */
export function sandboxCommand(program: Command): Command {
  const existing = program.commands.find((command) => command.name() === "sandbox");
  return (
    existing ??
    program.command("sandbox").description("inspect and manage sandboxes (containers by scope)")
  );
}
