import type { Logger } from "../common/index.js";
import type { CommandSignals } from "./interrupt.js";
import type { Paint } from "./render/colors.js";
import type { TerminalOutput } from "./render/output-streams.js";

export type { TerminalOutput };

/** What every command gets: the environment, output channels and a logger (stderr). */
export interface CliContext {
  env: NodeJS.ProcessEnv;
  logger: Logger;
  /** Results only (DESIGN.md §7). */
  stdout: (text: string) => void;
  /** Progress and messages for people. */
  stderr: (text: string) => void;
  /** Colour for each stream, decided once (a terminal, NO_COLOR, FORCE_COLOR): output-streams.ts. */
  paint: { stdout: Paint; stderr: Paint };
  /**
   * stdout and stderr reach the same place (one terminal, or `2>&1`): a final answer already
   * narrated on stderr is not printed again on stdout.
   */
  outputShared: boolean;
  /**
   * Which of stdout and stderr is a terminal that takes cursor codes (not TERM=dumb), and its
   * width: where a running command's line is redrawn in place and tables are fitted. Absent:
   * neither (a pipe, a test). Decided with `paint`, in one place: output-streams.ts.
   */
  terminal?: TerminalOutput | undefined;
  /** All of standard input (for `cordon run -`). */
  readStdin: () => Promise<string>;
  /** Standard input as it arrives (`cordon run --input-format stream-json`); default the process's. */
  stdinStream?: (() => NodeJS.ReadableStream) | undefined;
  /**
   * Set by a command that finishes without throwing but is not a success: one of `ExitCode`, or
   * the command's own code for `cordon exec`.
   */
  exitCode: number;
  /**
   * Asks the user a yes/no question (tests and embedders); default: on the terminal when stdin
   * and stderr are one, else undefined (no one to ask). See `confirmOnTerminal`.
   */
  confirm?: ((question: string) => Promise<boolean | undefined>) | undefined;
  /** SIGINT/SIGTERM handling for this command (`runCli` installs it); see `withInterrupt`. */
  signals?: CommandSignals | undefined;
}
