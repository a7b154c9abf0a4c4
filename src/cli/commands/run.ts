import { randomUUID } from "node:crypto";

import { Option, type Command } from "commander";

import { ConfigError, SandboxError } from "../../common/index.js";
import { thinkingLevels, type ThinkingLevel } from "../../config/index.js";
import { failedRunResult, type RunResult, type RunnerEvent } from "../../runner/index.js";
import type { CliContext } from "../context.js";
import { withInterrupt } from "../interrupt.js";
import { addPlanOptions, carryOption, runnerFromFlags, type PlanFlags } from "../runner-flags.js";
import { createRunRenderer, outputFormats, type OutputFormat } from "../render/run-renderer.js";
import { durationOf, nameList, positiveInteger } from "../flag-parsers.js";
import { removeSandboxAfter } from "./remove-after.js";

interface RunFlags extends PlanFlags {
  model?: string;
  modelScript?: string;
  maxTurns?: number;
  timeout?: number;
  outputFormat: OutputFormat;
  quiet?: boolean;
  allowTools?: string[];
  denyTools?: string[];
  /** `--no-wait` sets it false. */
  wait: boolean;
  setupCmd?: string;
  setupAllowHost?: string[];
  rm?: boolean;
  thinking?: ThinkingLevel;
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
      new Option(
        "--thinking <level>",
        "how much the model thinks first (token budgets: docs/configuration.md); default the agent's thinking, else off",
      ).choices(thinkingLevels),
    )
    .addOption(
      new Option("--output-format <format>", "what stdout carries")
        .choices(outputFormats)
        .default("text"),
    )
    .option("-q, --quiet", "text mode: only the final answer (and a failure's error), no progress")
    .option(
      "--allow-tools <names>",
      "only these tools (comma-separated; narrows the policy)",
      nameList,
    )
    .option("--deny-tools <names>", "never these tools (comma-separated)", nameList)
    .option(
      "--setup-cmd <command>",
      "prepare the sandbox first, e.g. 'npm ci', in a container of its own; the agent gets a fresh one",
    )
    .option(
      "--setup-allow-host <host>",
      "a host the setup command may reach, not the agent (repeatable)",
      nameList,
    )
    .option(
      "--rm",
      "remove the sandbox (container and private copy) when the run ends, however it ends",
    )
    .option(
      "--no-wait",
      "if another run holds the session, exit 3 at once instead of waiting for it",
    )
    .action(async (promptArgument: string | undefined, flags: RunFlags) => {
      const renderer = createRunRenderer({
        format: flags.outputFormat,
        quiet: flags.quiet,
        narrationShowsAnswer: context.outputShared,
        stdout: context.stdout,
        stderr: context.stderr,
      });
      // Machine readers get their one result (stream-json: run-start … run-end) even so.
      const reportWithoutRun = (result: RunResult): RunResult => {
        const events: RunnerEvent[] = [
          { type: "run-start", runId: result.runId, sessionKey: result.sessionKey, model: "" },
          { type: "run-end", ...result },
        ];
        for (const event of events) renderer.onEvent(event);
        return result;
      };
      let prompt: string;
      try {
        prompt = await readPrompt(context, promptArgument);
      } catch (error) {
        const result = reportWithoutRun(failedRunResult(randomUUID(), flags.session ?? "", error));
        context.exitCode = result.exitCode;
        return;
      }
      const runner = runnerFromFlags(context, flags, { modelScript: flags.modelScript });
      const result = await withInterrupt(context, async (signal) => {
        if (flags.setupCmd !== undefined) {
          context.stderr(`· setup: ${flags.setupCmd}\n`);
          // Loaded only when asked for, like every command's own module.
          const { runSetupPhase, setupFailureMessage } =
            await import("../../workflows/setup-phase.js");
          const setup = await runSetupPhase({
            runner,
            setup: { command: flags.setupCmd, allowHosts: flags.setupAllowHost ?? [] },
            agentId: flags.agent,
            sessionKey: flags.session,
            signal,
            onEgress: (d) =>
              context.stderr(
                `· setup egress ${d.allowed ? "allowed" : "REFUSED"}: ${d.host}:${d.port}\n`,
              ),
          }).catch((error: unknown) => failedRunResult(randomUUID(), flags.session ?? "", error));
          if ("runId" in setup) return reportWithoutRun(setup);
          if (setup.exitCode !== 0) {
            const error = new SandboxError(setupFailureMessage(setup), {
              fix: "fix the setup command, or allow what it needs with --setup-allow-host",
            });
            return reportWithoutRun(failedRunResult(randomUUID(), flags.session ?? "", error));
          }
        }
        return runner.run({
          prompt,
          agentId: flags.agent,
          sessionKey: flags.session,
          modelId: flags.model,
          limits: { maxTurns: flags.maxTurns, timeoutMs: flags.timeout },
          thinking: flags.thinking,
          allowTools: flags.allowTools,
          denyTools: flags.denyTools,
          waitForSession: flags.wait,
          signal,
          onEvent: (event) => renderer.onEvent(event),
        });
      });
      if (flags.rm) {
        const request = { agentId: flags.agent, sessionKey: flags.session };
        // A plan that cannot be made (a bad config) made no sandbox either.
        const plan = await runner.plan(request).catch(() => undefined);
        if (plan) await removeSandboxAfter(context, runner, plan, request, { quiet: flags.quiet });
      }
      context.exitCode = result.exitCode;
    });
}
