import { Option, type Command } from "commander";

import { ConfigError } from "../../common/index.js";
import { thinkingLevels, type ThinkingLevel } from "../../config/index.js";
import { MessageQueue, type RunResult, type UserContentBlock } from "../../runner/index.js";
import type { CliContext } from "../context.js";
import { withInterrupt } from "../interrupt.js";
import { addPlanOptions, carryOption, runnerFromFlags, type PlanFlags } from "../runner-flags.js";
import { liveLineOf } from "../render/live-line.js";
import { createRunRenderer, outputFormats, type OutputFormat } from "../render/run-renderer.js";
import { durationOf, nameList, positiveInteger } from "../flag-parsers.js";
import { StreamJsonInput, parseTypedLine } from "../stream-json-input.js";
import { sessionToContinue } from "../continue-session.js";
import { removeSandboxAfter } from "./remove-after.js";
import { RunStopReport } from "./run-stop.js";

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
  inputFormat: InputFormat;
  interactive?: boolean;
  continue?: boolean;
}

const inputFormats = ["text", "stream-json"] as const;
type InputFormat = (typeof inputFormats)[number];

/**
 * The task: the argument, or all of stdin for `-` (or no argument with piped input); with
 * `--input-format stream-json`, the argument or else the first message on stdin.
 */
async function readPrompt(
  context: CliContext,
  argument: string | undefined,
  input: StreamJsonInput | undefined,
): Promise<string | UserContentBlock[]> {
  if (input) {
    const first = argument !== undefined && argument !== "-" ? argument : await input.next();
    if (first !== undefined) return first;
  }
  const fromStdin = argument === "-" || (argument === undefined && !process.stdin.isTTY);
  const prompt = input ? "" : fromStdin ? await context.readStdin() : (argument ?? "");
  if (prompt.trim().length === 0) {
    throw new ConfigError("no task given", {
      fix: 'pass the task as an argument (cordon run "fix the failing test") or on stdin with `-`; to go on with a session, pass the next message (cordon run -c "now the docs")',
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
    .addOption(
      new Option(
        "--input-format <format>",
        'stream-json: user messages as JSON lines on stdin while the run goes ({"type":"user","message":{"role":"user","content":"…"}}); one arriving while tools run steers, one after the answer starts another round, EOF ends',
      )
        .choices(inputFormats)
        .default("text"),
    )
    .option(
      "-c, --continue",
      "go on with this project's most recent session (or the one --session names); the prompt is the next message",
    )
    .option(
      "-i, --interactive",
      "type messages while the run goes: a line typed while tools run steers, one typed after the answer is a follow-up; Ctrl-D ends",
    )
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
      // One renderer a run: each run of a stream-json conversation has its own start and end.
      const newRenderer = () =>
        createRunRenderer({
          format: flags.outputFormat,
          quiet: flags.quiet,
          narrationShowsAnswer: context.outputShared,
          stdout: context.stdout,
          stderr: context.stderr,
          live: liveLineOf(context, "stderr", { plain: flags.interactive }),
        });
      const renderer = newRenderer();
      const runner = runnerFromFlags(context, flags, { modelScript: flags.modelScript });
      // A run that cannot begin is still reported as one, framed by the orchestrator.
      const failed = (
        error: unknown,
        how: { sessionKey?: string | undefined; signal?: AbortSignal } = {},
      ): RunResult =>
        runner.failedRun(error, {
          sessionKey: "sessionKey" in how ? how.sessionKey : flags.session,
          signal: how.signal,
          onEvent: (event) => renderer.onEvent(event),
        });
      if (flags.interactive && flags.inputFormat === "stream-json") {
        const error = new ConfigError("-i and --input-format stream-json both read stdin", {
          fix: "use -i at a terminal, or --input-format stream-json from a program, not both",
        });
        context.exitCode = failed(error).exitCode;
        return;
      }
      const stdin = (): NodeJS.ReadableStream => context.stdinStream?.() ?? process.stdin;
      const onBadLine = (message: string): void => context.stderr(`cordon: ${message}\n`);
      const input =
        flags.inputFormat === "stream-json"
          ? new StreamJsonInput(stdin(), onBadLine)
          : flags.interactive
            ? new StreamJsonInput(stdin(), onBadLine, parseTypedLine)
            : undefined;
      // A person at the terminal is told what typing does, on stderr (stdout is the answer's).
      const hint = (text: string): void => {
        if (flags.interactive) context.stderr(`· ${text}\n`);
      };
      // Where a person's next line goes, as a shell's prompt marks it.
      const promptMarker = (): void => {
        if (flags.interactive) context.stderr("› ");
      };
      if (flags.interactive && (promptArgument === undefined || promptArgument === "-")) {
        hint("type the task and press Enter (Ctrl-D ends)");
        promptMarker();
      }
      let prompt: string | UserContentBlock[];
      try {
        prompt = await readPrompt(context, promptArgument, input);
      } catch (error) {
        context.exitCode = failed(error).exitCode;
        return;
      }
      if (flags.continue) {
        try {
          flags.session = await sessionToContinue(runner, {
            agentId: flags.agent,
            sessionKey: flags.session,
          });
        } catch (error) {
          context.exitCode = failed(error, { sessionKey: "" }).exitCode;
          return;
        }
        if (flags.outputFormat === "text" && !flags.quiet) {
          context.stderr(`· continuing session ${flags.session}\n`);
        }
      }
      const stop = new RunStopReport(flags.session);
      const result = await withInterrupt(
        context,
        async (signal) => {
          let runs = 0;
          const runOnce = (
            task: string | UserContentBlock[],
            steering?: MessageQueue,
          ): Promise<RunResult> => {
            const first = runs++ === 0;
            const rendered = first ? renderer : newRenderer();
            return runner.run({
              prompt: task,
              agentId: flags.agent,
              sessionKey: flags.session,
              modelId: flags.model,
              limits: {
                maxTurns: flags.maxTurns,
                timeoutMs: flags.timeout,
                thinking: flags.thinking,
              },
              allowTools: flags.allowTools,
              denyTools: flags.denyTools,
              waitForSession: flags.wait,
              // The setup phase comes once, before the conversation's first run.
              setup:
                first && flags.setupCmd !== undefined
                  ? { command: flags.setupCmd, allowHosts: flags.setupAllowHost ?? [] }
                  : undefined,
              signal,
              onEvent: (event) => {
                stop.onEvent(event);
                rendered.onEvent(event);
              },
              steering,
            });
          };
          if (!input) return runOnce(prompt);
          hint("type to steer while tools run, or a follow-up once the answer is in; Ctrl-D ends");
          return runConversation(input, prompt, runOnce, {
            onIdle: () => {
              hint("waiting for your next message (Ctrl-D ends)");
              promptMarker();
            },
            onSteer: () =>
              hint(
                "steering: the agent gets it after the tool call in progress, or as the next round",
              ),
          });
        },
        () => stop.describe(),
      );
      if (flags.rm) {
        const request = { agentId: flags.agent, sessionKey: flags.session };
        // A plan that cannot be made (a bad config) made no sandbox either.
        const plan = await runner.plan(request).catch(() => undefined);
        if (plan) await removeSandboxAfter(context, runner, plan, request, { quiet: flags.quiet });
      }
      context.exitCode = result.exitCode;
    });
}

/**
 * Runs on one session for as long as stdin sends messages (`--input-format stream-json`). While
 * a run goes, each message that arrives is queued as steering: after the tool call in progress
 * the turn's other calls are skipped and the message goes to the model, or, when the model is
 * writing its answer, it becomes another round of the same run. A message that arrives after a
 * run ended (or too late for it) starts the next run on the session; EOF ends the whole when the
 * run in progress ends. A run that fails ends it too: its exit code is the command's.
 */
async function runConversation(
  input: StreamJsonInput,
  first: string | UserContentBlock[],
  runOnce: (task: string | UserContentBlock[], steering: MessageQueue) => Promise<RunResult>,
  on: { onIdle: () => void; onSteer: () => void },
): Promise<RunResult> {
  let task: string | UserContentBlock[] | undefined = first;
  for (;;) {
    const steering = new MessageQueue();
    input.deliverTo((message) => {
      steering.push(message);
      on.onSteer();
    });
    const result = await runOnce(task, steering);
    input.deliverTo(undefined);
    if (result.exitCode !== 0) return result;
    // Messages the run did not take (they came as it ended) are the next task, in order.
    const late = steering.drain();
    if (late.length === 0) on.onIdle();
    task = late.length > 0 ? late.flat() : await input.next();
    if (task === undefined) return result;
  }
}
