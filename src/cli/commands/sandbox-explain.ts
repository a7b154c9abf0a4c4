import type { Command } from "commander";

import { stateDirectory } from "../../common/index.js";
import { describeForward, liveForwards, type ForwardRecord } from "../../runner/index.js";
import { explainPlan, redactPlanSecrets, type RunPlan } from "../../policy/index.js";
import { diskBudgetSupport, notEnforcedWarning } from "../../sandbox/index.js";
import type { CliContext } from "../context.js";
import { addPlanOptions, runnerFromFlags, type PlanFlags } from "../runner-flags.js";
import { describeSource } from "./config.js";
import { sandboxCommand } from "./sandbox-command.js";

export function registerSandboxExplainCommand(program: Command, context: CliContext): void {
  const explain = sandboxCommand(program)
    .command("explain")
    .description(
      "show what a run would get — sandboxed or not and why, container, mounts, settings, every tool decision — and the config keys behind each",
    );
  addPlanOptions(explain)
    .option(
      "--json",
      "print the run plan object the runner uses, as JSON (credential-like env values redacted), with `config`: the config file and whether it is trusted, and `forwards`: port forwards into its container listening now",
    )
    .action(async (options: PlanFlags & { json?: boolean }) => {
      // The runner's own plan(): the very object `cordon run` with these flags would use.
      const runner = runnerFromFlags(context, options);
      const plan = await withHostWarnings(
        await runner.plan({ agentId: options.agent, sessionKey: options.session }),
      );
      const source = (await runner.configSource()) ?? null;
      const container = plan.sandbox.spec?.containerName;
      const forwards = container
        ? (await liveForwards(stateDirectory(context.env))).filter((f) => f.sandbox === container)
        : [];
      if (options.json) {
        const shown = { ...redactPlanSecrets(plan), config: source, forwards };
        context.stdout(`${JSON.stringify(shown, null, 2)}
`);
        return;
      }
      const config = source
        ? `${source.file} ${describeSource(source)}`
        : "no config file (built-in defaults, environment and flags)";
      context.stdout(`config    ${config}
${explainPlan(plan)}`);
      if (container) context.stdout(describeForwards(forwards));
    });
}

/** Live forwards into the plan's container: a fact of this moment, so not part of the plan. */
function describeForwards(forwards: ForwardRecord[]): string {
  if (forwards.length === 0)
    return "forwards  none (`cordon port-forward` reaches a server in the sandbox)\n";
  return `forwards  ${forwards.map(describeForward).join("\n          ")}\n`;
}

/** The plan is pure; what this machine cannot enforce of it (the disk budget) is added here. */
async function withHostWarnings(plan: RunPlan): Promise<RunPlan> {
  if (plan.sandbox.spec?.diskBytes === undefined) return plan;
  const support = await diskBudgetSupport();
  if (support.enforced) return plan;
  return { ...plan, warnings: [...plan.warnings, notEnforcedWarning(support)] };
}
