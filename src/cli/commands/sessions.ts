import type { Command } from "commander";

import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";

import { ConfigError, stateDirectory } from "../../common/index.js";
import {
  acquireSessionLock,
  listSessions,
  readRunRecords,
  readSessionEntries,
  sessionDetails,
  sessionFiles,
  type SessionDetails,
  type SessionEntry,
  type SubagentRunRecord,
} from "../../runner/index.js";
import type { CliContext } from "../context.js";
import { ago, fitTable, tableWidth } from "../render/table.js";
import { resolveSession } from "../resolve-session.js";
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

function tokenCount(count: number): string {
  if (count < 1000) return String(count);
  if (count < 1_000_000) return `${(count / 1000).toFixed(1)}k`;
  return `${(count / 1_000_000).toFixed(1)}M`;
}

/** A session with the subagent run that made it, if one did. */
type ListedSession = SessionDetails & { parent?: string; subagent?: SubagentRunRecord };

/**
 * Each session with its parent (the session that spawned it, from the run records), children
 * listed right after their parent, newest first within each level.
 */
function withParents(sessions: SessionDetails[], records: SubagentRunRecord[]): ListedSession[] {
  const recordOf = new Map(records.map((r) => [`${r.childProject}|${r.childSessionKey}`, r]));
  const listed: ListedSession[] = sessions.map((s) => {
    const record = recordOf.get(`${s.project}|${s.sessionKey}`);
    return record ? { ...s, parent: record.requesterSessionKey, subagent: record } : s;
  });
  const byKey = new Set(listed.map((s) => `${s.project}|${s.sessionKey}`));
  const childrenOf = new Map<string, ListedSession[]>();
  const roots: ListedSession[] = [];
  for (const session of listed) {
    const parentKey = session.subagent
      ? `${session.subagent.requesterProject}|${session.subagent.requesterSessionKey}`
      : undefined;
    if (parentKey !== undefined && byKey.has(parentKey)) {
      childrenOf.set(parentKey, [...(childrenOf.get(parentKey) ?? []), session]);
    } else {
      roots.push(session);
    }
  }
  const ordered: ListedSession[] = [];
  const visit = (session: ListedSession): void => {
    ordered.push(session);
    for (const child of childrenOf.get(`${session.project}|${session.sessionKey}`) ?? []) {
      visit(child);
    }
  };
  roots.forEach(visit);
  return ordered;
}

/** The columns a narrow terminal loses first (PARENT is also drawn as the tree's └). */
const dropFirst = ["PARENT", "TOKENS", "WORKSPACE", "AGENT", "TURNS"];

function formatSessions(
  sessions: ListedSession[],
  withProject: boolean,
  width: number | undefined,
): string {
  const header = [
    "SESSION",
    "PARENT",
    "AGENT",
    "LAST RUN",
    "TURNS",
    "TOKENS",
    "LAST ACTIVITY",
    "WORKSPACE",
  ];
  return fitTable(
    withProject ? ["PROJECT", ...header] : header,
    sessions.map((s) => {
      const row = [
        s.parent ? `└ ${s.sessionKey}` : s.sessionKey,
        s.parent ?? "-",
        s.agentId ?? "-",
        s.lastRunStatus ?? "-",
        String(s.turns),
        `${tokenCount(s.tokens.input)} in / ${tokenCount(s.tokens.output)} out`,
        ago(s.lastActivityAt.toISOString()),
        s.workspace ?? "?",
      ];
      return withProject ? [s.project ?? "-", ...row] : row;
    }),
    { width, dropFirst },
  );
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
    .option("--names", "print only the names --session takes, one a line (shell completion)")
    .option("--wide", "every column, however wide the terminal")
    .action(
      async (
        options: ProjectFlags & { all?: boolean; json?: boolean; names?: boolean; wide?: boolean },
      ) => {
        const stateDir = stateDirectory(context.env);
        const summaries = await listSessions({
          stateDir,
          project: options.all ? undefined : await projectOf(context, options),
        });
        const details = await Promise.all(summaries.map((s) => sessionDetails(stateDir, s)));
        details.sort((a, b) => b.lastActivityAt.getTime() - a.lastActivityAt.getTime());
        const found = withParents(details, await readRunRecords(stateDir));
        if (options.json) {
          context.stdout(`${JSON.stringify(found, null, 2)}\n`);
          return;
        }
        if (options.names) {
          // `agent:main:fix-1` is `--session fix-1` (resolve-session.ts adds the agent back).
          const names = found.map((s) => s.sessionKey.replace(/^agent:[^:]+:/, ""));
          context.stdout(names.map((name) => `${name}\n`).join(""));
          return;
        }
        if (found.length === 0) {
          context.stderr("no sessions yet; `cordon run` creates one\n");
          return;
        }
        context.stdout(
          formatSessions(found, options.all === true, tableWidth(context.terminal, options.wide)),
        );
      },
    );

  addProjectOptions(
    sessions
      .command("show")
      .description("print a session's transcript")
      .argument(
        "<name>",
        "session key (agent:main:fix-1), name (fix-1) or a unique prefix of either",
      ),
  )
    .option("--json", "print the raw lines as a JSON array")
    .action(async (name: string, options: ProjectFlags & { json?: boolean }) => {
      const { stateDir, project, sessionKey: key } = await resolveSession(context, options, name);
      const entries = await readSessionEntries({ stateDir, sessionKey: key, project });
      if (entries.length === 0) {
        throw new ConfigError(`Session ${key} has no transcript yet.`, {
          fix: "run `cordon sessions list` to see this project's keys (`--all` for every project's; `--workspace` picks the project)",
        });
      }
      context.stdout(
        options.json ? `${JSON.stringify(entries, null, 2)}\n` : entries.map(formatEntry).join(""),
      );
    });

  addProjectOptions(
    sessions
      .command("rm")
      .description("delete a session's transcript and events (not while a run holds it)")
      .argument("<name>", "session key, name or a unique prefix of either"),
  ).action(async (name: string, options: ProjectFlags) => {
    const { stateDir, project, sessionKey } = await resolveSession(context, options, name);
    // Held like a run holds it, so no run is writing while the files go, and none starts then.
    const lock = await acquireSessionLock({
      stateDir,
      sessionKey,
      project,
      runId: `sessions-rm-${randomUUID()}`,
      wait: false,
    });
    try {
      const files = sessionFiles(stateDir, sessionKey, project);
      await rm(files.transcript, { force: true });
      await rm(files.events, { force: true });
    } finally {
      await lock.release();
    }
    context.stdout(`${sessionKey}\n`);
    context.stderr(
      `removed session ${sessionKey}; its sandbox, if any, stays until \`cordon sandbox rm\` or prune\n`,
    );
  });
}
