import type { PromptMode } from "../config/index.js";

/**
 * The bootstrap files a minimal prompt keeps: what the project says about the work and its
 * tools. The persona and the person (SOUL.md, IDENTITY.md, USER.md) and first-run notes
 * (BOOTSTRAP.md) are for a main agent talking to its user, not for a helper doing one task.
 */
export const minimalPromptFiles: readonly string[] = ["AGENTS.md", "TOOLS.md"];

/** The configured bootstrap files a prompt of this mode reads, in the configured order. */
export function bootstrapFilesFor(mode: PromptMode, configured: readonly string[]): string[] {
  switch (mode) {
    case "full":
      return [...configured];
    case "minimal":
      return configured.filter((file) => minimalPromptFiles.includes(file));
    case "none":
      return [];
  }
}
