import os from "node:os";

import type { Command } from "commander";

import { ConfigError } from "../../common/index.js";
import type { RunPlan } from "../../policy/index.js";
import type { ExecResult, Sandbox } from "../../sandbox/index.js";
import { quoteShellArg } from "../../tools/index.js";
import type { CliContext } from "../context.js";
import { withInterrupt } from "../interrupt.js";
import { printable } from "../printable.js";
import { addPlanOptions, carryOption, runnerFromFlags, type PlanFlags } from "../runner-flags.js";
import { durationOf } from "../flag-parsers.js";
import { runInteractiveCommand } from "./exec-interactive.js";
import { removeSandboxAfter } from "./remove-after.js";

interface ExecFlags extends PlanFlags {
  json?: boolean;
  timeout?: number;
  interactive?: boolean;
  tty?: boolean;
  rm?: boolean;
}

/**
 * Whether the command's stderr ended a line: cordon's own lines after it start on a line of their
 * own, so what the command printed last cannot be read as the start of cordon's message.
 */
class StderrLines {
  #atLineStart = true;

  saw(chunk: Uint8Array): void {
    if (chunk.byteLength > 0) this.#atLineStart = chunk[chunk.byteLength - 1] === 0x0a;
  }

  /** `line`, after a newline when the command's output left the line open. */
  own(line: string): string {
    const text = this.#atLineStart ? line : `\n${line}`;
    this.#atLineStart = true;
    return text;
  }
}

/** Refuses flag combinations that cannot work, before anything starts. */
function checkInteractiveFlags(flags: ExecFlags): void {
  if (!flags.interactive && !flags.tty) return;
  const with_ = flags.tty ? "-t" : "-i";
  if (flags.json) {
    throw new ConfigError(`--json collects the output; it does not go with ${with_}`, {
      fix: `drop --json, or ${with_}`,
    });
  }
  if (flags.timeout !== undefined) {
    throw new ConfigError(
      `--timeout does not go with ${with_}: the person at the terminal ends it`,
      {
        fix: `drop --timeout, or ${with_}`,
      },
    );
  }
  if (flags.tty && !process.stdin.isTTY) {
    throw new ConfigError("-t needs a terminal on stdin, and stdin is not one", {
      fix: "drop -t and pipe the input with -i alone: echo hi | cordon exec -i -- cat",
    });
  }
}

/** Like a shell: a signal death is 128 + the signal number (an unnamed one counts as SIGKILL). */
function shellExitCode(result: ExecResult): number {
  if (result.exitCode !== null) return result.exitCode;
  const number = result.signal ? os.constants.signals[result.signal as NodeJS.Signals] : undefined;
  return 128 + (number ?? os.constants.signals.SIGKILL);
}

/** The container, user and directory of a planned sandbox; `-i`/`-t` need a container. */
function interactiveTarget(plan: RunPlan): {
  containerName: string;
  user: string;
  workdir: string;
} {
  const spec = plan.sandbox.spec;
  if (!plan.sandbox.enabled || !spec) {
    throw new ConfigError(
      `-i and -t attach to a sandbox container, and this plan runs on the host (${plan.sandbox.reason})`,
      { fix: "run the command in your own shell, or drop -i/-t" },
    );
  }
  return {
    containerName: spec.containerName,
    user: spec.docker.user,
    workdir: spec.docker.workdir,
  };
}

/** The non-interactive path: the tools' exec, output streamed (or collected for --json). */
async function runCommand(
  context: CliContext,
  sandbox: Sandbox,
  command: string,
  flags: ExecFlags,
  signal: AbortSignal,
  lines: StderrLines,
): Promise<number> {
  // One decoder per stream, in streaming mode: a UTF-8 character split across chunks stays whole.
  const stdout = new TextDecoder();
  const stderr = new TextDecoder();
  const result = await sandbox.exec(command, {
    signal,
    timeoutMs: flags.timeout,
    onStdout: flags.json
      ? undefined
      : (chunk) => context.stdout(stdout.decode(chunk, { stream: true })),
    onStderr: flags.json
      ? undefined
      : (chunk) => {
          lines.saw(chunk);
          context.stderr(stderr.decode(chunk, { stream: true }));
        },
  });
  // Whatever an incomplete last character left in the decoders.
  const restOut = stdout.decode();
  const restErr = stderr.decode();
  if (restOut) context.stdout(restOut);
  if (restErr) context.stderr(restErr);
  if (flags.json) context.stdout(`${JSON.stringify({ sandbox: sandbox.id, ...result })}\n`);
  if (result.timedOut) context.stderr(lines.own(`cordon: the command timed out and was killed\n`));
  if (result.oomKilled) {
    context.stderr(lines.own(`cordon: the command ran out of memory (the sandbox's limit)\n`));
  }
  if (result.truncated && result.fullOutputPath) {
    context.stderr(
      lines.own(
        `cordon: output was truncated; all of it is in ${result.fullOutputPath} in the sandbox\n`,
      ),
    );
  }
  return shellExitCode(result);
}

/**
 * `cordon exec -- CMD...`: one command in the sandbox a run with these flags would get — the same
 * plan, container and mounts — like `docker exec`, but chosen by policy. Output streams through;
 * the exit code is the command's.
 */
export function registerExecCommand(program: Command, context: CliContext): void {
  const exec = program
    .command("exec")
    .description("run one command in the sandbox a run would get (same plan, container, mounts)")
    .argument("<command...>", "the command and its arguments (put them after --)");
  addPlanOptions(exec)
    .option(...carryOption)
    .option(
      "--timeout <duration>",
      "kill the command's whole process tree after this long",
      durationOf("--timeout"),
    )
    .option("--json", "print {exitCode, stdout, stderr, ...} instead of streaming")
    .option("-i, --interactive", "attach stdin to the command (echo hi | cordon exec -i -- cat)")
    .option("-t, --tty", "a terminal for the command (cordon exec -it -- bash is a shell)")
    .option("--rm", "remove the sandbox (container and private copy) afterwards, however it ended")
    .action(async (words: string[], flags: ExecFlags) => {
      if (words.length === 0)
        throw new ConfigError("no command given", { fix: "cordon exec -- ls -la" });
      checkInteractiveFlags(flags);
      // One word is taken as a shell line (`cordon exec -- 'make test | tail'`); several are quoted.
      const command = words.length === 1 ? (words[0] ?? "") : words.map(quoteShellArg).join(" ");
      const runner = runnerFromFlags(context, flags);
      const lines = new StderrLines();
      let started = false;
      await withInterrupt(
        context,
        async (signal) => {
          const { plan, lease } = await runner.acquireSandbox({
            agentId: flags.agent,
            sessionKey: flags.session,
            signal,
            // Progress names files of the workspace (a skipped FIFO's name): shown, never obeyed.
            onProgress: (progress) => context.stderr(`· ${printable(progress.message)}\n`),
          });
          started = true;
          try {
            context.exitCode =
              flags.interactive || flags.tty
                ? await runInteractiveCommand({
                    env: context.env,
                    ...interactiveTarget(plan),
                    command,
                    interactive: flags.interactive ?? false,
                    tty: flags.tty ?? false,
                    signal,
                    onSharedOutput: (chunk) => lines.saw(chunk),
                  })
                : await runCommand(context, lease.sandbox, command, flags, signal, lines);
            // The line saying it was stopped starts a line of its own (not after a prompt).
            if (signal.aborted) context.stderr(lines.own(""));
          } catch (error) {
            // The error line cordon prints next starts a line of its own.
            context.stderr(lines.own(""));
            throw error;
          } finally {
            await lease.release();
            if (flags.rm) {
              await removeSandboxAfter(context, runner, plan, {
                agentId: flags.agent,
                sessionKey: flags.session,
              });
            }
          }
        },
        () =>
          started
            ? `stopped the command (its processes in the sandbox are killed); the sandbox keeps its files${flags.rm ? "" : ": `cordon exec` with the same --session runs in it again"}`
            : "stopped before the command started; nothing ran",
      );
    });
}
