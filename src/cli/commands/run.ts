import { randomUUID } from "node:crypto";

import { Option, type Command } from "commander";

import { ConfigError } from "../../common/index.js";
import { failedRunResult, type RunnerEvent } from "../../runner/index.js";
import type { CliContext } from "../context.js";
import { withInterrupt } from "../interrupt.js";
import { addPlanOptions, carryOption, runnerFromFlags, type PlanFlags } from "../runner-flags.js";
import { createRunRenderer, outputFormats, type OutputFormat } from "../render/run-renderer.js";
import { durationOf, nameList, positiveInteger } from "../flag-parsers.js";

interface RunFlags extends PlanFlags {
  model?: string;
  modelScript?: string;
  maxTurns?: number;
  timeout?: number;
  outputFormat: OutputFormat;
  allowTools?: string[];
  denyTools?: string[];
  /** `--no-wait` sets it false. */
  wait: boolean;
}

/** The task text: the argument, or all of stdin for `-` (or no argument with piped input). */
async function readPrompt(context: CliContext, argument: string | undefined): Promise<string> {
  const fromStdin = argument === "-" || (argument === undefined && !process.stdin.isTTY);
  const prompt = fromStdin ? await context.readStdin() : (argument ?? "");
  if (prompt.trim().length === 0) {
    throw new ConfigError("no task given", {
      fix: 'pass the task as an argument (cordon run "fix the failing test") or on stdin with `-`',
    });
  }
  return prompt;
}

export function registerRunCommand(program: Command, context: CliContext): void {
  const run = program
    .command("run")
    .description("run an agent on a task: plan (policy), sandbox, tools, model loop")
    .argument("[prompt]", "the task; `-` reads it from stdin");
  addPlanOptions(run)
    .option(...carryOption)
    .option("--model <id>", "model for this run")
    .option("--model-script <file>", "replay a scripted model instead of calling an API")
    .option("--max-turns <n>", "most model calls in this run", positiveInteger)
    .option("--timeout <duration>", "wall-clock limit, e.g. 90s, 10m, 1h", durationOf("--timeout"))
    .addOption(
      new Option("--output-format <format>", "what stdout carries")
        .choices(outputFormats)
        .default("text"),
    )
    .option(
      "--allow-tools <names>",
      "only these tools (comma-separated; narrows the policy)",
      nameList,
    )
    .option("--deny-tools <names>", "never these tools (comma-separated)", nameList)
    .option(
      "--no-wait",
      "if another run holds the session, exit 3 at once instead of waiting for it",
    )
    .action(async (promptArgument: string | undefined, flags: RunFlags) => {
      const renderer = createRunRenderer({
        format: flags.outputFormat,
        stdout: context.stdout,
        stderr: context.stderr,
      });
      let prompt: string;
      try {
        prompt = await readPrompt(context, promptArgument);
      } catch (error) {
        // Machine readers get their one result (stream-json: run-start … run-end) even so.
        const result = failedRunResult(randomUUID(), flags.session ?? "", error);
        const events: RunnerEvent[] = [
          { type: "run-start", runId: result.runId, sessionKey: result.sessionKey, model: "" },
          { type: "run-end", ...result },
        ];
        for (const event of events) renderer.onEvent(event);
        context.exitCode = result.exitCode;
        return;
      }
      const runner = runnerFromFlags(context, flags, { modelScript: flags.modelScript });
      const result = await withInterrupt(context, (signal) =>
        runner.run({
          prompt,
          agentId: flags.agent,
          sessionKey: flags.session,
          modelId: flags.model,
          limits: { maxTurns: flags.maxTurns, timeoutMs: flags.timeout },
          allowTools: flags.allowTools,
          denyTools: flags.denyTools,
          waitForSession: flags.wait,
          signal,
          onEvent: (event) => renderer.onEvent(event),
        }),
      );
      context.exitCode = result.exitCode;
    });
}
