import type { Command } from "commander";

import { explainPlan } from "../../policy/index.js";
import type { CliContext } from "../context.js";
import { loadCliConfig, planFromConfig } from "../plan-context.js";
import { sandboxCommand } from "./sandbox-command.js";

interface ExplainOptions {
  agent?: string;
  session?: string;
  config?: string;
  json?: boolean;
}

export function registerSandboxExplainCommand(program: Command, context: CliContext): void {
  sandboxCommand(program)
    .command("explain")
    .description(
      "show what a run would get — sandboxed or not and why, container, mounts, settings, every tool decision — and the config keys behind each",
    )
    .option("--agent <id>", "agent id (default: the default agent)")
    .option("--session <key>", "session name or key (default: the agent's main session)")
    .option("--config <path>", "config file (default: $CORDON_CONFIG, else ./cordon.json5)")
    .option("--json", "print the run plan object the runner uses, as JSON")
    .action(async (options: ExplainOptions) => {
      const { config } = await loadCliConfig(context, { configPath: options.config });
      const plan = planFromConfig(context, config, {
        agentId: options.agent,
        sessionKey: options.session,
      });
      context.stdout(options.json ? `${JSON.stringify(plan, null, 2)}\n` : explainPlan(plan));
    });
}
