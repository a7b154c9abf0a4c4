import os from "node:os";

import type { Command } from "commander";

import { ConfigError } from "../../common/index.js";
import type { ExecResult } from "../../sandbox/index.js";
import { quoteShellArg } from "../../tools/index.js";
import type { CliContext } from "../context.js";
import { withInterrupt } from "../interrupt.js";
import { addPlanOptions, carryOption, runnerFromFlags, type PlanFlags } from "../runner-flags.js";
import { durationOf } from "../flag-parsers.js";

interface ExecFlags extends PlanFlags {
  json?: boolean;
  timeout?: number;
}

/** Like a shell: a signal death is 128 + the signal number (an unnamed one counts as SIGKILL). */
function shellExitCode(result: ExecResult): number {
  if (result.exitCode !== null) return result.exitCode;
  const number = result.signal ? os.constants.signals[result.signal as NodeJS.Signals] : undefined;
  return 128 + (number ?? os.constants.signals.SIGKILL);
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
    .action(async (words: string[], flags: ExecFlags) => {
      if (words.length === 0)
        throw new ConfigError("no command given", { fix: "cordon exec -- ls -la" });
      // One word is taken as a shell line (`cordon exec -- 'make test | tail'`); several are quoted.
      const command = words.length === 1 ? (words[0] ?? "") : words.map(quoteShellArg).join(" ");
      const runner = runnerFromFlags(context, flags);
      // One decoder per stream, in streaming mode: a UTF-8 character split across chunks stays whole.
      const stdout = new TextDecoder();
      const stderr = new TextDecoder();
      await withInterrupt(context, async (signal) => {
        const { lease } = await runner.acquireSandbox({
          agentId: flags.agent,
          sessionKey: flags.session,
          signal,
          onProgress: (progress) => context.stderr(`· ${progress.message}\n`),
        });
        try {
          const result = await lease.sandbox.exec(command, {
            signal,
            timeoutMs: flags.timeout,
            onStdout: flags.json
              ? undefined
              : (chunk) => context.stdout(stdout.decode(chunk, { stream: true })),
            onStderr: flags.json
              ? undefined
              : (chunk) => context.stderr(stderr.decode(chunk, { stream: true })),
          });
          // Whatever an incomplete last character left in the decoders.
          const restOut = stdout.decode();
          const restErr = stderr.decode();
          if (restOut) context.stdout(restOut);
          if (restErr) context.stderr(restErr);
          if (flags.json)
            context.stdout(`${JSON.stringify({ sandbox: lease.sandbox.id, ...result })}\n`);
          if (result.timedOut) context.stderr(`cordon: the command timed out and was killed\n`);
          if (result.oomKilled)
            context.stderr(`cordon: the command ran out of memory (the sandbox's limit)\n`);
          if (result.truncated && result.fullOutputPath) {
            context.stderr(
              `cordon: output was truncated; all of it is in ${result.fullOutputPath} in the sandbox\n`,
            );
          }
          context.exitCode = shellExitCode(result);
        } finally {
          await lease.release();
        }
      });
    });
}
