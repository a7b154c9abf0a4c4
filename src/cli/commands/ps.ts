import { hostname } from "node:os";

import type { Command } from "commander";

import { stateDirectory } from "../../common/index.js";
import { listLockedSessions, readRunActivity, type LockedSession } from "../../runner/index.js";
import type { CliContext } from "../context.js";
import { ago, formatTable } from "../render/table.js";

/** One run in progress, as `cordon ps --json` prints it. */
export interface RunningRun {
  sessionKey: string;
  runId: string;
  agentId?: string | undefined;
  workspace?: string | undefined;
  pid: number;
  host: string;
  /** When the run took the session. */
  since: string;
  /** `running`; with `--all` also `dead` (its process is gone; the next run takes the lock over); `unknown` when held on another host. */
  state: "running" | "dead" | "unknown";
  /** Its container (or `host` in sandbox mode off), once the sandbox is ready. */
  sandbox?: string | undefined;
  turns: number;
  doing: string;
  lastEventAt?: string | undefined;
}

const stateNames = { alive: "running", dead: "dead", unknown: "unknown" } as const;

async function describeRun(locked: LockedSession): Promise<RunningRun> {
  const { holder } = locked;
  const activity = await readRunActivity(locked.eventsFile, holder.runId);
  return {
    sessionKey: holder.sessionKey,
    runId: holder.runId,
    agentId: holder.agentId,
    workspace: holder.workspace,
    pid: holder.pid,
    host: holder.host,
    since: holder.since,
    state: stateNames[locked.state],
    sandbox: activity.sandbox,
    turns: activity.turns,
    doing: locked.state === "dead" ? "its process is gone" : activity.doing,
    lastEventAt: activity.lastEventAt,
  };
}

export function registerPsCommand(program: Command, context: CliContext): void {
  program
    .command("ps")
    .description(
      "runs in progress (of every project under CORDON_HOME): session, pid, since when, sandbox, what each is doing",
    )
    .option("--all", "also locks left by runs whose process is gone")
    .option("--json", "print as JSON")
    .action(async (options: { all?: boolean; json?: boolean }) => {
      const locked = await listLockedSessions({ stateDir: stateDirectory(context.env) });
      const shown = locked.filter((lock) => options.all || lock.state !== "dead");
      const runs = await Promise.all(shown.map(describeRun));
      if (options.json) {
        context.stdout(`${JSON.stringify(runs, null, 2)}\n`);
        return;
      }
      if (runs.length === 0) {
        context.stderr("no runs in progress\n");
        return;
      }
      context.stdout(
        formatTable(
          ["SESSION", "STATE", "PID", "STARTED", "SANDBOX", "TURNS", "DOING", "WORKSPACE"],
          runs.map((run) => [
            run.sessionKey,
            run.state,
            run.host === hostname() ? String(run.pid) : `${run.pid}@${run.host}`,
            ago(run.since),
            run.sandbox ?? "-",
            String(run.turns),
            run.doing,
            run.workspace ?? "?",
          ]),
        ),
      );
    });
}
