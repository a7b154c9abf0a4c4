import path from "node:path";

import type { Command } from "commander";

import { ConfigError } from "../../common/index.js";
import { ScriptedModelClient, type ModelClient } from "../../runner/index.js";
import {
  findTestCommand,
  fixTests,
  maxAttempts,
  testCommandSources,
} from "../../workflows/index.js";
import type { CliContext } from "../context.js";
import { withInterrupt } from "../interrupt.js";
import { liveLineOf } from "../render/live-line.js";
import { createRunRenderer } from "../render/run-renderer.js";
import type { AgentRuntimeName } from "../../config/index.js";
import { allowHostOption, carryOption, runnerFromFlags, runtimeOption } from "../runner-flags.js";
import {
  durationOf,
  nameList,
  positiveInteger,
  repeatable,
  wholeNumberUpTo,
} from "../flag-parsers.js";

interface FixTestsFlags {
  testCmd?: string;
  runtime?: AgentRuntimeName;
  workspace?: string;
  out: string;
  agent?: string;
  config?: string;
  model?: string;
  modelScript?: string[];
  attempts: number;
  carry?: string[];
  maxTurns?: number;
  timeout?: number;
  testTimeout?: number;
  allowTestChanges?: boolean;
  allowBinary?: boolean;
  keepSandboxes?: boolean;
  json?: boolean;
  allowHost?: string[];
  setupCmd?: string;
  setupAllowHost?: string[];
}

export function registerFixTestsCommand(program: Command, context: CliContext): void {
  program
    .command("fix-tests")
    .description(
      "let an agent fix failing tests on a private copy, verify the patch on a clean copy, write artifacts",
    )
    .option(
      "--test-cmd <command>",
      "the command that runs the tests, e.g. 'npm test' (default: the one the repository declares: a Makefile test target, package.json's scripts.test, go.mod, Cargo.toml, pytest, CMake tests, .bats files)",
    )
    .option("--workspace <dir>", "the repository (default: the current directory)")
    .option("--out <dir>", "where the artifacts go", "cordon-fix-tests")
    .option("--agent <id>", "agent from the config")
    .option("--config <path>", "config file")
    .option("--model <id>", "model for the agent")
    .option(
      "--model-script <file>",
      "replay a scripted model instead of calling an API; with --attempts, once per attempt (one script for all, or one each)",
      repeatable,
    )
    .option(
      "--attempts <n>",
      `independent agents at once, each in its own copy; the first verified fix wins (1 to ${maxAttempts})`,
      wholeNumberUpTo(maxAttempts),
      1,
    )
    .option("--max-turns <n>", "most model calls", positiveInteger)
    .option("--timeout <duration>", "limit of the agent run, e.g. 20m", durationOf("--timeout"))
    .option(
      "--test-timeout <duration>",
      "limit of each test run (default 10m)",
      durationOf("--test-timeout"),
    )
    .option(
      "--allow-test-changes",
      "accept changes to tests, CI configuration and lockfiles (the test harness is still verified as it was)",
    )
    .option(...allowHostOption)
    .option(
      "--setup-cmd <command>",
      "prepare the copy before the first test run, e.g. 'npm ci' (run again before verification)",
    )
    .option(
      "--setup-allow-host <host>",
      "a host the setup command may reach, not the agent (repeatable)",
      nameList,
    )
    .option(
      "--allow-binary",
      "accept binary files in the patch (refused by default: they cannot be reviewed)",
    )
    .option("--keep-sandboxes", "keep the work and verify sandboxes for inspection")
    .option("--json", "print result.json on stdout")
    .option(...carryOption)
    .addOption(runtimeOption())
    .action(async (flags: FixTestsFlags) => {
      const runner = runnerFromFlags(
        context,
        {
          agent: flags.agent,
          config: flags.config,
          workspace: flags.workspace ?? ".",
          allowHost: flags.allowHost,
          carry: flags.carry,
          runtime: flags.runtime,
        },
        { modelScript: flags.modelScript?.[0], forceSeededCopy: true },
      );
      const attemptModels = await attemptModelsOf(flags.modelScript ?? [], flags.attempts);
      const testCommand = await testCommandOf(flags, context);
      const progress = createRunRenderer({
        format: "text",
        // The agent's answer is progress here; stdout carries the result only. It is narrated
        // on stderr already, so it is not printed there a second time.
        stdout: context.stderr,
        stderr: context.stderr,
        narrationShowsAnswer: true,
        live: liveLineOf(context, "stderr"),
      });
      const result = await withInterrupt(
        context,
        (signal) =>
          fixTests({
            runner,
            testCommand,
            outDir: path.resolve(flags.out),
            agentId: flags.agent,
            modelId: flags.model,
            limits: { maxTurns: flags.maxTurns, timeoutMs: flags.timeout },
            testTimeoutMs: flags.testTimeout,
            allowTestChanges: flags.allowTestChanges,
            allowBinary: flags.allowBinary,
            keepSandboxes: flags.keepSandboxes,
            attempts: flags.attempts,
            attemptModels,
            setup:
              flags.setupCmd === undefined
                ? undefined
                : { command: flags.setupCmd, allowHosts: flags.setupAllowHost ?? [] },
            signal,
            onEvent: (event) => progress.onEvent(event),
            onPhase: (message) => context.stderr(`==> ${message}\n`),
          }),
        () =>
          `stopped fix-tests; your workspace is unchanged (fix-tests never writes to it), what it wrote so far is in ${path.resolve(flags.out)}`,
      );
      if (flags.json) context.stdout(`${JSON.stringify(result, null, 2)}\n`);
      else context.stdout(`${result.message}\n`);
      context.exitCode = result.exitCode;
      // Stopped by a signal: its one line on stderr has said what is left, and where.
      if (context.signals?.interruption) return;
      if (result.fix) context.stderr(`  fix: ${result.fix}\n`);
      context.stderr(`artifacts: ${path.resolve(flags.out)}\n`);
    });
}

/** `--test-cmd`, or the command the repository declares (said on stderr), or exit 2. */
async function testCommandOf(flags: FixTestsFlags, context: CliContext): Promise<string> {
  if (flags.testCmd !== undefined) return flags.testCmd;
  const repository = path.resolve(flags.workspace ?? ".");
  const found = await findTestCommand(repository);
  if (!found) {
    throw new ConfigError(`no --test-cmd, and ${repository} declares no test command`, {
      fix: `pass the command that runs the tests, e.g. --test-cmd 'npm test' (looked for ${testCommandSources})`,
    });
  }
  context.stderr(
    `· test command: ${found.command} (from ${found.source}; --test-cmd chooses another)\n`,
  );
  return found.command;
}

/**
 * With several attempts, each scripted one plays a script of its own: a script is one model's
 * turns, played once. One script is replayed by every attempt; several go one to each attempt,
 * in order. Without a script (the API) the runner's model serves every attempt.
 */
async function attemptModelsOf(
  scripts: readonly string[],
  attempts: number,
): Promise<ModelClient[] | undefined> {
  if (scripts.length > 1 && scripts.length !== attempts) {
    throw new ConfigError(
      `--model-script was given ${scripts.length} times but --attempts is ${attempts}.`,
      {
        fix: `give one script (every attempt replays it) or exactly one per attempt (--attempts ${scripts.length})`,
      },
    );
  }
  if (attempts === 1 || scripts.length === 0) return undefined;
  return Promise.all(
    Array.from({ length: attempts }, (_, index) =>
      ScriptedModelClient.fromFile(path.resolve(scripts[index] ?? (scripts[0] as string))),
    ),
  );
}
