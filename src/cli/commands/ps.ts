import { hostname } from "node:os";

import type { Command } from "commander";

import { stateDirectory } from "../../common/index.js";
import {
  listLockedSessions,
  listWaitingRuns,
  readRunActivity,
  type LockedSession,
  type WaitingRun,
} from "../../runner/index.js";
import type { CliContext } from "../context.js";
import { printable } from "../printable.js";
import { ago, fitTable, tableWidth } from "../render/table.js";
import { addTopOptions, watchTop } from "./top.js";

/** One run in progress, as `cordon ps --json` prints it. */
export interface RunningRun {
  sessionKey: string;
  runId: string;
  agentId?: string | undefined;
  workspace?: string | undefined;
  pid: number;
  host: string;
  /** When the run took the session (a waiting run: when it began to wait). */
  since: string;
  /**
   * `running`; `waiting` for the session another run holds (`waitingFor` names that run); with
   * `--all` also `dead` (its process is gone; the next run takes the lock over); `unknown` when
   * held on another host.
   */
  state: "running" | "waiting" | "dead" | "unknown";
  /** A waiting run: the run holding the session. */
  waitingFor?: string | undefined;
  /** Its container (or `host` in sandbox mode off), once the sandbox is ready. */
  sandbox?: string | undefined;
  turns: number;
  doing: string;
  /** While a tool runs: the last line of its output so far. */
  output?: string | undefined;
  lastEventAt?: string | undefined;
  /** The MCP client driving the session (`cordon mcp`), as it names itself. */
  client?: string | undefined;
  /** Requests its egress proxy refused so far, and the last host refused. */
  egressRefused: number;
  lastRefusedHost?: string | undefined;
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
    output: locked.state === "dead" ? undefined : activity.output,
    lastEventAt: activity.lastEventAt,
    client: activity.client,
    egressRefused: activity.egressRefused,
    lastRefusedHost: activity.lastRefusedHost,
  };
}

/** A waiting run has written no events yet (it writes them once it holds the session). */
function describeWaiting(waiting: WaitingRun, holders: readonly LockedSession[]): RunningRun {
  const { waiter } = waiting;
  const holder = holders.find((locked) => locked.lockFile === waiting.lockFile)?.holder;
  return {
    sessionKey: waiter.sessionKey,
    runId: waiter.runId,
    agentId: waiter.agentId,
    workspace: waiter.workspace,
    pid: waiter.pid,
    host: waiter.host,
    since: waiter.since,
    state: "waiting",
    waitingFor: holder?.runId,
    turns: 0,
    egressRefused: 0,
    doing: holder
      ? `waiting for the session (held by pid ${holder.pid}, run ${holder.runId.slice(0, 8)})`
      : "waiting for the session",
  };
}

/** `line` cut to `chars` to keep the table readable. */
function cut(line: string, chars: number): string {
  return line.length > chars ? `${line.slice(0, chars - 1)}…` : line;
}
const outputColumnChars = 60;
/** With output beside it, the step (a long command line) gives way, so the output shows. */
const stepBesideOutputChars = 30;

/** The runs in progress under `stateDir` (with `all`, also those whose process is gone). */
export async function listRuns(stateDir: string, all: boolean): Promise<RunningRun[]> {
  const locked = await listLockedSessions({ stateDir });
  const waiting = await listWaitingRuns({ stateDir });
  const shown = locked.filter((lock) => all || lock.state !== "dead");
  return [
    ...(await Promise.all(shown.map(describeRun))),
    ...waiting.map((run) => describeWaiting(run, locked)),
  ];
}

/** What a run is doing, as one cell: the MCP client, the step, the running command's output. */
export function doingCell(run: RunningRun): string {
  // What a run does names the agent's own commands and their output: shown, never obeyed.
  const step = run.client ? `[${run.client}] ${run.doing}` : run.doing;
  if (run.output === undefined) return printable(step);
  return printable(`${cut(step, stepBesideOutputChars)} › ${cut(run.output, outputColumnChars)}`);
}

/** The columns a narrow terminal loses first; DOING, what a person runs `ps` for, stays. */
const dropFirst = ["WORKSPACE", "TURNS", "PID", "STARTED", "SANDBOX"];

/** `cordon ps`'s table, fitted to `width` (undefined: every column whole). */
export function formatRuns(runs: readonly RunningRun[], width: number | undefined): string {
  return fitTable(
    ["SESSION", "STATE", "PID", "STARTED", "SANDBOX", "TURNS", "DOING", "WORKSPACE"],
    runs.map((run) => [
      run.sessionKey,
      run.state,
      run.host === hostname() ? String(run.pid) : `${run.pid}@${printable(run.host)}`,
      ago(run.since),
      run.sandbox ?? "-",
      String(run.turns),
      doingCell(run),
      printable(run.workspace ?? "?"),
    ]),
    { width, dropFirst },
  );
}

interface PsOptions {
  all?: boolean;
  json?: boolean;
  wide?: boolean;
  watch?: boolean;
  interval: string;
  iterations?: string;
}

export function registerPsCommand(program: Command, context: CliContext): void {
  addTopOptions(
    program
      .command("ps")
      .description(
        "runs in progress (of every project under CORDON_HOME), and runs waiting for a busy session: session, pid, since when, sandbox, what each is doing",
      ),
  )
    .option("--all", "also locks left by runs whose process is gone")
    .option("--json", "print as JSON")
    .option("--wide", "every column, however wide the terminal")
    .option("-w, --watch", "a live view with each sandbox's CPU, memory and disk: `cordon top`")
    .action(async (options: PsOptions) => {
      if (options.watch) {
        await watchTop(context, options);
        return;
      }
      const runs = await listRuns(stateDirectory(context.env), options.all === true);
      if (options.json) {
        context.stdout(`${JSON.stringify(runs, null, 2)}\n`);
        return;
      }
      if (runs.length === 0) {
        context.stderr("no runs in progress\n");
        return;
      }
      context.stdout(formatRuns(runs, tableWidth(context.terminal, options.wide)));
    });
}
