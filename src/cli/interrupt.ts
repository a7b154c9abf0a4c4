import { StoppedBySignal, exitCodeForSignal, type StopSignal } from "../common/index.js";
import type { CliContext } from "./context.js";

export type { StopSignal };

/** How a command was stopped: the signal and the exit code it gives (128 + its number). */
export interface Interruption {
  signal: StopSignal;
  exitCode: number;
}

/**
 * What a stop leaves, said in the one line a stopped command prints after the signal's name:
 * what was stopped and what state is left ("stopped the run …; run again with --session s to
 * continue"). Asked when the line is printed, so it can name the phase the work had reached.
 */
export type DescribeStop = () => string;

/**
 * SIGINT and SIGTERM for one command, from its start to its end (installed by `runCli`).
 *
 * - A command doing work that can stop gracefully (`withInterrupt`) has it aborted: the model
 *   stream and the running command stop, the session stays consistent, stream-json still ends
 *   with a `run-end`, wait files and locks are removed; then one line says what was stopped and
 *   what is left, and the command exits with 130 (SIGINT) or 143 (SIGTERM).
 * - Any other command ends at once with that line and code.
 * - A second signal forces: the process exits at once; the exit hooks (`onProcessExit`) still
 *   remove the session lock and wait file it holds.
 *
 * On a terminal the first Ctrl-C is acknowledged at once, since a graceful stop takes a moment;
 * a SIGTERM gets only the final line.
 */
export class CommandSignals {
  interruption: Interruption | undefined;
  private work: { controller: AbortController; describe: DescribeStop } | undefined;
  private readonly listener = (signal: NodeJS.Signals): void => this.onSignal(signal);

  constructor(
    private readonly options: {
      stderr: (text: string) => void;
      /** `cordon <words>`, named when a command without a graceful stop is stopped. */
      command: string;
      /** Whether a person is watching stderr (a terminal). */
      terminal: boolean;
      /** Ends the process (default `process.exit`); for tests. */
      exit?: ((code: number) => never) | undefined;
    },
  ) {}

  install(): () => void {
    process.on("SIGINT", this.listener);
    process.on("SIGTERM", this.listener);
    return () => {
      process.off("SIGINT", this.listener);
      process.off("SIGTERM", this.listener);
    };
  }

  /** Runs `task` with a signal the first SIGINT/SIGTERM aborts; see the class comment. */
  async run<T>(task: (signal: AbortSignal) => Promise<T>, describe: DescribeStop): Promise<T> {
    const controller = new AbortController();
    this.work = { controller, describe };
    try {
      return await task(controller.signal);
    } finally {
      this.work = undefined;
      if (this.interruption) this.say(this.interruption.signal, describe());
    }
  }

  private onSignal(name: NodeJS.Signals): void {
    const signal: StopSignal = name === "SIGTERM" ? "SIGTERM" : "SIGINT";
    if (this.interruption) {
      const what = this.work?.describe() ?? `stopped \`${this.options.command}\``;
      this.options.stderr(`cordon: ${signal} again, stopped at once: ${what}\n`);
      this.exit(this.interruption.exitCode);
    }
    this.interruption = { signal, exitCode: exitCodeForSignal(signal) };
    if (!this.work) {
      this.say(signal, `stopped \`${this.options.command}\``);
      this.exit(this.interruption.exitCode);
    }
    // Ctrl-C is a person waiting at the terminal: told at once that the stop takes a moment.
    // SIGTERM comes from a program (kill, a CI runner), which reads only the final line.
    if (this.options.terminal && signal === "SIGINT") {
      this.say(signal, "stopping… (Ctrl-C again stops at once)");
    }
    // The reason names the signal: the run's own record of its end gives the same code.
    this.work.controller.abort(new StoppedBySignal(signal));
  }

  private say(signal: StopSignal, text: string): void {
    this.options.stderr(`cordon: ${signal}: ${text}\n`);
  }

  private exit(code: number): never {
    return (this.options.exit ?? ((c: number) => process.exit(c)))(code);
  }
}

/**
 * Runs long work so that SIGINT/SIGTERM stop it gracefully (see `CommandSignals`); `describe`
 * gives the line printed when that happens. Outside `runCli` (no signals installed) the work
 * simply runs.
 */
export async function withInterrupt<T>(
  context: CliContext,
  task: (signal: AbortSignal) => Promise<T>,
  describe: DescribeStop = () => "stopped",
): Promise<T> {
  if (!context.signals) return task(new AbortController().signal);
  return context.signals.run(task, describe);
}
