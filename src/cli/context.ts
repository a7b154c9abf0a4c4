import type { ExitCode, Logger } from "../common/index.js";

/** What every command gets: the environment, output channels and a logger (stderr). */
export interface CliContext {
  env: NodeJS.ProcessEnv;
  logger: Logger;
  /** Results only (DESIGN.md §7). */
  stdout: (text: string) => void;
  /** Progress and messages for people. */
  stderr: (text: string) => void;
  /** Set by a command that finishes without throwing but is not a success (e.g. doctor). */
  exitCode: ExitCode;
}
