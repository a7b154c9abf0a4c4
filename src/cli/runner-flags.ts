import path from "node:path";

import { Option, type Command } from "commander";

import { existingDirectory, nameList } from "./flag-parsers.js";

import { agentRuntimes, type AgentRuntimeName } from "../config/index.js";
import { createRunner, type Runner, type RunnerOptions } from "../runner/index.js";
import type { CliContext } from "./context.js";

/** The flags every command that plans a run shares: which agent, session, config and workspace. */
export interface PlanFlags {
  agent?: string | undefined;
  session?: string | undefined;
  config?: string | undefined;
  workspace?: string | undefined;
  /** `--allow-host`, repeatable. */
  allowHost?: string[] | undefined;
  /** `--carry` (on the commands that seed a copy: run, exec, fix-tests). */
  carry?: string[] | undefined;
  /** `--runtime`: the agent program, over `agents.*.runtime`. */
  runtime?: AgentRuntimeName | undefined;
}

export function addPlanOptions(command: Command): Command {
  return command
    .option("--agent <id>", "agent from the config (default: the default agent)")
    .option("--session <key>", "session key (default: the agent's main session)")
    .option("--config <path>", "config file (default: CORDON_CONFIG, else ./cordon.json5)")
    .option(
      "--workspace <dir>",
      "agent workspace (default: the config's, else the current directory)",
      existingDirectory,
    )
    .option(...allowHostOption)
    .addOption(runtimeOption());
}

/**
 * `--runtime cordon|claude-code`: the agent program (docs/runtimes.md). On every planning command,
 * so `diff`, `exec` and `sandbox explain` name the sandbox a claude-code run had.
 */
export function runtimeOption(): Option {
  return new Option(
    "--runtime <name>",
    "the agent program: cordon's own loop, or Claude Code in the sandbox (over agents.*.runtime)",
  ).choices(agentRuntimes);
}

/** `--allow-host HOST` (repeatable): hosts the sandbox may reach through its egress proxy. */
export const allowHostOption = [
  "--allow-host <host>",
  'a host the sandbox may reach through its egress proxy ("registry.npmjs.org", "*.pythonhosted.org"); repeatable',
  nameList,
] as const;

/**
 * `--carry a,b` (repeatable; run, exec, fix-tests): ignored workspace paths copied into the seeded
 * copy for this run, replacing `sandbox.carry`.
 */
export const carryOption = [
  "--carry <paths>",
  "git-ignored workspace paths to copy into the seeded copy, e.g. node_modules,.venv (replaces sandbox.carry; repeatable)",
  nameList,
] as const;

/** A runner configured from the shared flags, exactly as `cordon run` makes it. */
export function runnerFromFlags(
  context: CliContext,
  flags: PlanFlags,
  options: Pick<RunnerOptions, "modelScript" | "forceSeededCopy"> = {},
): Runner {
  return createRunner({
    env: context.env,
    configPath: flags.config,
    workspace: flags.workspace ? path.resolve(flags.workspace) : undefined,
    modelScript: options.modelScript,
    forceSeededCopy: options.forceSeededCopy,
    allowHosts: flags.allowHost,
    carry: flags.carry,
    runtime: flags.runtime,
    logger: context.logger,
  });
}
