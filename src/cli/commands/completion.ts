import { Argument, type Command } from "commander";

import { completionScript, completionShells, type CompletionShell } from "../completion-scripts.js";
import type { CliContext } from "../context.js";
import { createFullProgram } from "../program.js";

export function registerCompletionCommand(program: Command, context: CliContext): void {
  program
    .command("completion")
    .description("print a shell completion script: bash, zsh or fish")
    .addArgument(new Argument("<shell>", "the shell").choices(completionShells))
    .addHelpText(
      "after",
      "\nLoad it with `source <(cordon completion bash)`, `source <(cordon completion zsh)` (after\n" +
        "compinit) or `cordon completion fish | source`; the same line in ~/.bashrc, ~/.zshrc or\n" +
        "~/.config/fish/config.fish keeps it.\n",
    )
    .action(async (shell: CompletionShell) => {
      // Every command module, so the script lists every command and flag of this version.
      const full = await createFullProgram(context);
      context.stdout(completionScript(full, shell));
    });
}
