import type { Command } from "commander";

import { stateDirectory } from "../../common/index.js";
import {
  DockerEngine,
  SandboxInventory,
  type OrphanWorkspace,
  type SandboxSummary,
  type UnusedSupportVolume,
  baseImageFromEnv,
} from "../../sandbox/index.js";
import { liveForwards, type ForwardRecord } from "../../runner/index.js";
import type { CliContext } from "../context.js";
import { rememberNoticedOrphans } from "../orphan-notice.js";
import { ago, fitTable, tableWidth } from "../render/table.js";
import { driftOf, type SandboxDrift } from "./sandbox-drift.js";

/** The inventory of the state directory and engine the environment names. */
export function inventoryFor(context: CliContext): SandboxInventory {
  return new SandboxInventory({
    engine: DockerEngine.fromEnv(context.env),
    stateDirectory: stateDirectory(context.env),
    logger: context.logger,
    imageOptions: { baseImage: baseImageFromEnv(context.env) },
  });
}

/**
 * A sandbox as `sandbox list --json` prints it: the inventory's summary, its drift, and the port
 * forwards into it that are listening now.
 */
export type ListedSandbox = SandboxSummary & { drift: SandboxDrift; forwards: ForwardRecord[] };

/**
 * What `sandbox list --json` prints: the sandboxes, the private workspaces whose container is
 * gone (`cordon sandbox prune` releases them), and the engine's support volumes no container
 * mounts (prune removes them too).
 */
export interface ListedJson {
  sandboxes: ListedSandbox[];
  orphans: OrphanWorkspace[];
  unusedSupportVolumes: UnusedSupportVolume[];
}

/** The DRIFT column: "no", or "yes: why" (several reasons joined), or "?: why". */
function driftCell(drift: SandboxDrift): string {
  if (drift.drifted === false) return "no";
  const short = drift.reasons.map((reason) => reason.replace(/ \(.*\)$/, "").replace(/:.*$/, ""));
  return `${drift.drifted ? "yes" : "?"}: ${short.join("; ")}`;
}

/** The columns a narrow terminal loses first: each repeats or refines what another shows. */
const dropFirst = ["KEY", "CREATED", "SCOPE", "IMAGE", "FORWARDS", "EGRESS", "AGENT", "WORKSPACE"];

function formatSandboxes(sandboxes: ListedSandbox[], width: number | undefined): string {
  return fitTable(
    [
      "NAME",
      "STATE",
      "SCOPE",
      "KEY",
      "AGENT",
      "SESSION",
      "WORKSPACE",
      "IMAGE",
      "DRIFT",
      "EGRESS",
      "FORWARDS",
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
      // Which image: a project's cordon-project-<name>:<hash> names the build it runs.
      s.image,
      driftCell(s.drift),
      s.egress ? `${s.egress.allow.join(",")} via ${s.egress.proxy} (${s.egress.state})` : "none",
      s.forwards.map((f) => `${f.localPort}->${f.remotePort}`).join(",") || "-",
      ago(s.createdAt),
      ago(s.lastUsedAt),
    ]),
    { width, dropFirst },
  );
}

export function describeOrphan(orphan: OrphanWorkspace): string {
  const what = orphan.volumes
    ? "Docker volumes on the engine"
    : orphan.mounted
      ? "a mounted disk image, holding a loop device"
      : orphan.diskImage
        ? "a disk image"
        : "a directory";
  const of = orphan.sandbox ? ` of ${orphan.sandbox}` : "";
  return `orphaned workspace ${orphan.path}${of}: ${what}, whose container is gone; \`cordon sandbox prune\` releases it (work never applied is kept)\n`;
}

/** A line naming the support volumes prune would remove; "" when there are none. */
function describeUnusedSupport(unused: UnusedSupportVolume[]): string {
  if (unused.length === 0) return "";
  return `${unused.length} support volume(s) on the engine no container mounts (${unused.map((volume) => volume.name).join(", ")}): \`cordon sandbox prune\` removes them; they are made again when needed\n`;
}

export function registerSandboxListCommand(sandbox: Command, context: CliContext): void {
  sandbox
    .command("list")
    .description(
      "the sandboxes of this state directory (CORDON_HOME): scope, key, agent, session, workspace, state, drift from the current config and image (and why), egress, port forwards listening now, created, last used",
    )
    .option("--json", "print as JSON")
    .option("--wide", "every column, however wide the terminal")
    .option(
      "--config <path>",
      "compare with this config file (default: each project's own, as `cordon run` there finds it)",
    )
    .action(async (options: { json?: boolean; wide?: boolean; config?: string }) => {
      const summaries = await inventoryFor(context).list();
      const drift = await driftOf(summaries, {
        env: context.env,
        configPath: options.config,
        logger: context.logger,
      });
      const forwards = await liveForwards(stateDirectory(context.env));
      const sandboxes = summaries.map((summary): ListedSandbox => {
        const found = drift.get(summary.name) ?? { drifted: null, reasons: [] };
        // The plan, where there is one, is what the next acquire compares with.
        const configStatus =
          found.expectedConfigHash === undefined
            ? summary.configStatus
            : found.expectedConfigHash === summary.configHash
              ? "current"
              : "stale";
        return {
          ...summary,
          configStatus,
          drift: found,
          forwards: forwards.filter((forward) => forward.sandbox === summary.name),
        };
      });
      const orphans = await inventoryFor(context).orphans();
      const unusedSupport = await inventoryFor(context).unusedSupportVolumes();
      // Named here: the next command need not say so again.
      await rememberNoticedOrphans(stateDirectory(context.env), orphans);
      if (options.json) {
        // The same facts as the text: sandboxes, and workspaces whose container is gone.
        const listed: ListedJson = { sandboxes, orphans, unusedSupportVolumes: unusedSupport };
        context.stdout(`${JSON.stringify(listed, null, 2)}\n`);
        return;
      }
      if (sandboxes.length === 0 && orphans.length === 0) {
        context.stderr("no sandboxes; `cordon run` creates them as sessions need them\n");
        context.stderr(describeUnusedSupport(unusedSupport));
        return;
      }
      const width = tableWidth(context.terminal, options.wide);
      if (sandboxes.length > 0) context.stdout(formatSandboxes(sandboxes, width));
      // Not in the table (no container to show), and on stderr: stdout stays the table.
      for (const orphan of orphans) context.stderr(describeOrphan(orphan));
      context.stderr(describeUnusedSupport(unusedSupport));
    });
}
