import { CommandSignals } from "./interrupt.js";
import { CommanderError } from "commander";

import {
  CordonError,
  ExitCode,
  createLogger,
  exitCodeOf,
  messageOf,
  systemErrorFix,
} from "../common/index.js";
import { fstatSync } from "node:fs";

import { checkEnvironment } from "../config/environment.js";

import { noticesOrphans } from "./orphan-notice-commands.js";
import { createProgram } from "./program.js";
import { plain, type Paint } from "./render/colors.js";
import { decideOutput, type OutputStream } from "./render/output-streams.js";
import type { CliContext } from "./context.js";

/** Where the CLI writes (and reads stdin from); tests capture and supply it. */
export interface CliOutput {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Standard input; default the process's. */
  readStdin?: (() => Promise<string>) | undefined;
  /** Standard input as a stream; default the process's. */
  stdinStream?: (() => NodeJS.ReadableStream) | undefined;
  /** Whether stdout and stderr reach the same place (see `CliContext.outputShared`). */
  outputShared?: boolean | undefined;
  /**
   * The streams behind `stdout` and `stderr`, judged once for terminal, width and colour
   * (`decideOutput`); default none: plain lines, as into a pipe.
   */
  streams?: { stdout: OutputStream; stderr: OutputStream } | undefined;
  /** Asks the user a yes/no question (see `CliContext.confirm`); default: on the terminal. */
  confirm?: ((question: string) => Promise<boolean | undefined>) | undefined;
}

/**
 * Whether fd 1 and fd 2 are one file: the same terminal, or one log file or pipe (`2>&1`). Then
 * what is narrated on stderr is already where stdout goes.
 */
function stdoutIsStderr(): boolean {
  try {
    const [out, err] = [fstatSync(1), fstatSync(2)];
    return out.dev === err.dev && out.ino === err.ino;
  } catch {
    return false;
  }
}

async function readProcessStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks).toString("utf8");
}

const processOutput: CliOutput = {
  stdout: (text) => {
    process.stdout.write(text);
  },
  stderr: (text) => {
    process.stderr.write(text);
  },
  get outputShared() {
    return stdoutIsStderr();
  },
  streams: { stdout: process.stdout, stderr: process.stderr },
};

/**
 * The CLI boundary: builds the program, runs it, and turns every failure into one clear line on
 * stderr (with the fix, when there is one) and the exit code of DESIGN.md §7.
 */
export async function runCli(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  output: CliOutput = processOutput,
): Promise<number> {
  let debug = env["CORDON_DEBUG"] === "1";
  const command = commandName(argv);
  const signals = new CommandSignals({
    stderr: output.stderr,
    command,
    // A person reading stderr, even on a dumb terminal, is told at once that a stop takes time.
    terminal: output.streams?.stderr.isTTY === true,
  });
  const uninstallSignals = signals.install();
  const { paint, terminal } = decideOutput(output.streams, env);
  try {
    // Every CORDON_* / ANTHROPIC_* value is checked before any command runs (exit 2, one line).
    const checked = checkEnvironment(env);
    debug = checked.debug;
    const context: CliContext = {
      env,
      paint,
      logger: createLogger({
        level: checked.logLevel,
        // https://no-color.org: present and not empty.
        color: !env["NO_COLOR"],
      }),
      stdout: output.stdout,
      stderr: output.stderr,
      readStdin: output.readStdin ?? readProcessStdin,
      stdinStream: output.stdinStream ?? (() => process.stdin),
      outputShared: output.outputShared ?? false,
      terminal,
      exitCode: ExitCode.success,
      confirm: output.confirm,
      signals,
    };
    const program = await createProgram(context, argv);
    await program.parseAsync([...argv]);
    if (!signals.interruption && noticesOrphans(command)) {
      // Loaded only here: commands that never use the state directory stay as quick to start.
      await (await import("./orphan-notice.js")).noticeOrphans(context);
    }
    if (signals.interruption && output === processOutput) {
      // Stopped and cleaned up: end now. Left to end by itself, the process would linger over
      // open engine connections, and a signal in its last moments kills it by Node's default.
      process.exit(signals.interruption.exitCode);
    }
    return signals.interruption?.exitCode ?? context.exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version are "errors" to commander; their output is already printed.
      return error.exitCode === 0 ? ExitCode.success : ExitCode.usage;
    }
    // Stopped by a signal: the line saying so is printed; the abort's own error says no more.
    if (signals.interruption && exitCodeOf(error) === ExitCode.interrupted) {
      return signals.interruption.exitCode;
    }
    output.stderr(formatError(error, debug, paint.stderr));
    return signals.interruption?.exitCode ?? exitCodeOf(error);
  } finally {
    // The real process keeps them until it exits: a signal while it ends still gets its code
    // and line, never Node's default death by signal. In-process callers (tests) get theirs back.
    if (output !== processOutput) uninstallSignals();
  }
}

/** Commands that take a subcommand: `cordon sandbox prune` is named with both words. */
const commandGroups = new Set(["sandbox", "config", "sessions", "image"]);

/** `cordon run`, `cordon sandbox prune`: the command argv names, for the line a stop prints. */
function commandName(argv: readonly string[]): string {
  const words = argv.slice(2).filter((word) => !word.startsWith("-"));
  const [first, second] = words;
  if (first === undefined) return "cordon";
  return commandGroups.has(first) && second !== undefined
    ? `cordon ${first} ${second}`
    : `cordon ${first}`;
}

export function formatError(error: unknown, withStack: boolean, paint: Paint = plain): string {
  let text = `${paint(["red", "bold"], "cordon:")} ${messageOf(error)}\n`;
  const fix = CordonError.is(error) ? error.fix : systemErrorFix(error);
  if (fix) text += `  ${paint("green", "fix:")} ${fix}\n`;
  if (!CordonError.is(error) || withStack) {
    text +=
      withStack && error instanceof Error
        ? `${error.stack}\n`
        : "  (set CORDON_DEBUG=1 for a stack trace)\n";
  }
  return text;
}
