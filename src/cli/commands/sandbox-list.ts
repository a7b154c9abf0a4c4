import type { Command } from "commander";

import { stateDirectory } from "../../common/index.js";
import {
  DockerEngine,
  SandboxInventory,
  type SandboxSummary,
  baseImageFromEnv,
} from "../../sandbox/index.js";
import type { CliContext } from "../context.js";
import { ago, formatTable } from "../render/table.js";

/** The inventory of the state directory and engine the environment names. */
export function inventoryFor(context: CliContext): SandboxInventory {
  return new SandboxInventory({
    engine: DockerEngine.fromEnv(context.env),
    stateDirectory: stateDirectory(context.env),
    logger: context.logger,
    imageOptions: { baseImage: baseImageFromEnv(context.env) },
  });
}

function formatSandboxes(sandboxes: SandboxSummary[]): string {
  return formatTable(
    [
      "NAME",
      "STATE",
      "SCOPE",
      "KEY",
      "AGENT",
      "SESSION",
      "WORKSPACE",
      "IMAGE",
      "CONFIG",
      "EGRESS",
      "CREATED",
      "LAST USED",
    ],
    sandboxes.map((s) => [
      s.name,
      s.state,
      s.scope,
      s.scopeKey,
      s.agent,
      s.session,
      s.workspace || "?",
      s.imageStatus,
      s.configStatus,
      s.egress ? `${s.egress.allow.join(",")} via ${s.egress.proxy} (${s.egress.state})` : "none",
      ago(s.createdAt),
      ago(s.lastUsedAt),
    ]),
  );
}

export function registerSandboxListCommand(sandbox: Command, context: CliContext): void {
  sandbox
    .command("list")
    .description(
      "the sandboxes of this state directory (CORDON_HOME): scope, key, agent, session, workspace, state, whether image and config are current, created, last used",
    )
    .option("--json", "print as JSON")
    .action(async (options: { json?: boolean }) => {
      const sandboxes = await inventoryFor(context).list();
      if (options.json) {
        context.stdout(`${JSON.stringify(sandboxes, null, 2)}\n`);
        return;
      }
      if (sandboxes.length === 0) {
        context.stderr("no sandboxes; `cordon run` creates them as sessions need them\n");
        return;
      }
      context.stdout(formatSandboxes(sandboxes));
    });
}
