import type { Command } from "commander";

import { ConfigError, stateDirectory } from "../../common/index.js";
import { listSessions, readSessionEntries, type SessionEntry } from "../../runner/index.js";
import type { CliContext } from "../context.js";
import { runnerFromFlags, type PlanFlags } from "../runner-flags.js";

type ProjectFlags = Omit<PlanFlags, "session">;

/** Sessions are kept per project: the workspace a run with these flags would work on. */
function addProjectOptions(command: Command): Command {
  return command
    .option("--agent <id>", "agent from the config (default: the default agent)")
    .option("--config <path>", "config file (default: CORDON_CONFIG, else ./cordon.json5)")
    .option(
      "--workspace <dir>",
      "the project whose sessions to use (default: the config's workspace, else the current directory)",
    );
}

async function projectOf(context: CliContext, flags: ProjectFlags): Promise<string> {
  const plan = await runnerFromFlags(context, flags).plan({ agentId: flags.agent });
  return plan.agent.workspaceId;
}

function blockSummary(block: { type: string; [key: string]: unknown }): string {
  switch (block.type) {
    case "text":
      return String(block["text"]);
    case "tool_use":
      return `[tool_use ${String(block["name"])}] ${JSON.stringify(block["input"])}`;
    case "tool_result": {
      const content = (block["content"] as { type: string; text?: string }[] | undefined) ?? [];
      const text = content.map((c) => c.text ?? `[${c.type}]`).join("\n");
      return `[tool_result${block["isError"] ? " error" : ""}] ${text}`;
    }
    case "thinking":
      return `[thinking] ${String(block["thinking"])}`;
    default:
      return `[${block.type}]`;
  }
}

function formatEntry(entry: SessionEntry): string {
  const label = entry.kind === "message" ? entry.role : entry.kind;
  const content = Array.isArray(entry.content)
    ? entry.content.map((b) => blockSummary(b as { type: string })).join("\n")
    : String(entry.content);
  const indented = content.replace(/\n/g, "\n    ");
  return `${entry.ts} ${label}${entry.stopReason ? ` (${entry.stopReason})` : ""}\n    ${indented}\n`;
}

export function registerSessionsCommand(program: Command, context: CliContext): void {
  const sessions = program.command("sessions").description("agent sessions (JSONL transcripts)");

  addProjectOptions(
    sessions.command("list").description("this project's sessions, most recent first"),
  )
    .option("--all", "the sessions of every project under the state directory")
    .option("--json", "print as JSON")
    .action(async (options: ProjectFlags & { all?: boolean; json?: boolean }) => {
      const found = await listSessions({
        stateDir: stateDirectory(context.env),
        project: options.all ? undefined : await projectOf(context, options),
      });
      if (options.json) {
        context.stdout(`${JSON.stringify(found, null, 2)}\n`);
        return;
      }
      if (found.length === 0) {
        context.stderr("no sessions yet; `cordon run` creates one\n");
        return;
      }
      for (const s of found) {
        const project = options.all ? `${s.project ?? "-"}\t` : "";
        context.stdout(
          `${project}${s.sessionKey}\t${s.updatedAt.toISOString()}\t${s.sizeBytes} bytes\n`,
        );
      }
    });

  addProjectOptions(
    sessions
      .command("show")
      .description("print a session's transcript")
      .argument("<key>", "session key, e.g. agent:main:main"),
  )
    .option("--json", "print the raw lines as a JSON array")
    .action(async (key: string, options: ProjectFlags & { json?: boolean }) => {
      const entries = await readSessionEntries({
        stateDir: stateDirectory(context.env),
        sessionKey: key,
        project: await projectOf(context, options),
      });
      if (entries.length === 0) {
        throw new ConfigError(`no session ${key}`, {
          fix: "run `cordon sessions list` to see this project's keys (`--all` for every project's; `--workspace` picks the project)",
        });
      }
      context.stdout(
        options.json ? `${JSON.stringify(entries, null, 2)}\n` : entries.map(formatEntry).join(""),
      );
    });
}
