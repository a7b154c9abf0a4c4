import type { Command } from "commander";
import { createLogUpdate } from "log-update";

import { ConfigError, ExitCode, messageOf, sleep, stateDirectory } from "../../common/index.js";
import {
  DockerEngine,
  commandsRunning,
  readSandboxUsage,
  type SandboxSummary,
  type SandboxUsage,
} from "../../sandbox/index.js";
import type { CliContext } from "../context.js";
import { printable } from "../printable.js";
import { fitTable, tableWidth } from "../render/table.js";
import { doingCell, listRuns, type RunningRun } from "./ps.js";
import { inventoryFor } from "./sandbox-list.js";

/** One line of `cordon top`: a run and its sandbox, or a running sandbox no run holds. */
export interface TopRow {
  session: string;
  /**
   * A run's state (`running`, `waiting`); for a running sandbox no run holds, `busy` (commands of
   * `cordon exec` or another process run in it) or `idle`.
   */
  state: string;
  sandbox?: string | undefined;
  /** CPU, memory and disk budget use, while the sandbox runs. */
  usage?: SandboxUsage | undefined;
  /** Requests its egress proxy refused so far, and the last host refused. */
  egressRefused: number;
  lastRefusedHost?: string | undefined;
  /** The run, for what it is doing (absent for a sandbox no run holds). */
  run?: RunningRun | undefined;
  /** For a sandbox no run holds: the commands running in it, oldest first. */
  commands?: string[] | undefined;
}

/** A snapshot: the rows, and what could not be read (the engine down: runs only). */
export interface TopSnapshot {
  at: string;
  rows: TopRow[];
  problem?: string | undefined;
}

/** Reads runs (their session locks and events) and the engine's sandboxes, then each one's use. */
export async function takeSnapshot(context: CliContext): Promise<TopSnapshot> {
  const runs = await listRuns(stateDirectory(context.env), false);
  let sandboxes: SandboxSummary[] = [];
  let problem: string | undefined;
  try {
    sandboxes = await inventoryFor(context).list();
  } catch (error) {
    problem = `no sandbox figures: ${messageOf(error)}`;
  }
  const engine = DockerEngine.fromEnv(context.env);
  const running = sandboxes.filter((sandbox) => sandbox.state === "running");
  const usage = new Map(
    await Promise.all(
      running.map(
        async (sandbox) =>
          [sandbox.name, await readSandboxUsage(engine, sandbox).catch(() => undefined)] as const,
      ),
    ),
  );
  const held = new Set(runs.map((run) => run.sandbox));
  const rows: TopRow[] = [
    ...runs.map((run) => ({
      session: run.sessionKey,
      state: run.state,
      sandbox: run.sandbox,
      usage: run.sandbox === undefined ? undefined : usage.get(run.sandbox),
      egressRefused: run.egressRefused,
      lastRefusedHost: run.lastRefusedHost,
      run,
    })),
    ...(await Promise.all(
      running
        .filter((sandbox) => !held.has(sandbox.name))
        .map(async (sandbox) => {
          const commands = await commandsRunning(engine.containers, sandbox.name);
          return {
            session: sandbox.session,
            state: commands?.length ? "busy" : "idle",
            sandbox: sandbox.name,
            usage: usage.get(sandbox.name),
            egressRefused: 0,
            commands,
          };
        }),
    )),
  ];
  return { at: new Date().toISOString(), rows, problem };
}

/** 134217728 → "128M", as `docker stats` and `top` abbreviate. */
function size(bytes: number): string {
  const units = ["B", "K", "M", "G", "T"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value >= 10 || unit === 0 ? Math.round(value) : value.toFixed(1)}${units[unit]}`;
}

/** What runs in a sandbox no run holds: its oldest command (the agent's bytes: shown, never obeyed). */
function commandsCell(commands: readonly string[] | undefined): string {
  const [oldest] = commands ?? [];
  return oldest === undefined ? "-" : printable(`exec: ${oldest}`);
}

/** The columns a narrow terminal loses first; what each run is doing stays. */
const dropFirst = ["SANDBOX", "EGRESS", "DISK"];

/** The snapshot as text: one summary line, then the table fitted to `width`. */
export function formatSnapshot(snapshot: TopSnapshot, width: number | undefined): string {
  const runs = snapshot.rows.filter((row) => row.run).length;
  const count = (state: string) => snapshot.rows.filter((row) => row.state === state).length;
  const time = snapshot.at.slice(11, 19);
  let text = `cordon top  ${time}  ${runs} run${runs === 1 ? "" : "s"}; sandboxes without a run: ${count("busy")} busy, ${count("idle")} idle\n`;
  if (snapshot.problem) text += `${snapshot.problem}\n`;
  if (snapshot.rows.length === 0) return `${text}no runs in progress and no sandbox running\n`;
  return (
    text +
    fitTable(
      ["SESSION", "STATE", "SANDBOX", "CPU", "MEM", "DISK", "EGRESS", "DOING"],
      snapshot.rows.map((row) => {
        const usage = row.usage;
        return [
          row.session,
          row.state,
          row.sandbox ?? "-",
          usage ? `${usage.cpuPercent.toFixed(1)}%` : "-",
          usage ? `${size(usage.memoryBytes)}/${size(usage.memoryLimitBytes)}` : "-",
          usage?.disk ? `${size(usage.disk.usedBytes)}/${size(usage.disk.sizeBytes)}` : "-",
          row.egressRefused === 0
            ? "-"
            : `${row.egressRefused} refused (${printable(row.lastRefusedHost ?? "?")})`,
          row.run ? doingCell(row.run) : commandsCell(row.commands),
        ];
      }),
      { width, dropFirst, cutFirst: { DOING: 60 } },
    )
  );
}

interface TopOptions {
  interval: string;
  iterations?: string | undefined;
  json?: boolean | undefined;
  wide?: boolean | undefined;
}

function positive(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (!Number.isFinite(number) || number <= 0) {
    throw new ConfigError(`${flag} ${value} is not a positive number`, {
      fix: `give ${flag} a positive number, e.g. ${flag} 2`,
    });
  }
  return number;
}

/**
 * `cordon top` (and `ps --watch`): on a terminal, a view redrawn in place every `--interval`
 * seconds (log-update), `q` or Ctrl-C to quit; elsewhere (a pipe, a file, TERM=dumb) plain
 * snapshots one after another, as `top -b` prints them; `--json` one JSON object a line.
 */
export async function watchTop(context: CliContext, options: TopOptions): Promise<void> {
  const intervalMs = (positive(options.interval, "--interval") ?? 2) * 1000;
  const iterations = positive(options.iterations, "--iterations");
  const live = context.terminal?.stdout === true && !options.json;
  const quit = new AbortController();
  const stopKeys = live ? listenForQuit(context, quit) : () => undefined;
  const view = live
    ? createLogUpdate(
        {
          isTTY: true,
          write: (text: string) => context.stdout(text),
          get columns() {
            return context.terminal?.columns();
          },
          get rows() {
            return context.terminal?.rows();
          },
        } as unknown as NodeJS.WriteStream,
        { showCursor: true },
      )
    : undefined;
  try {
    for (let shown = 0; iterations === undefined || shown < iterations; shown += 1) {
      if (shown > 0) {
        const stopped = await sleep(intervalMs, quit.signal).then(
          () => false,
          () => true,
        );
        if (stopped) break;
      }
      const snapshot = await takeSnapshot(context);
      if (options.json) context.stdout(`${JSON.stringify(snapshot)}\n`);
      else if (view) {
        view(`${formatSnapshot(snapshot, tableWidth(context.terminal, options.wide))}q quits\n`);
      } else context.stdout(`${formatSnapshot(snapshot, undefined)}\n`);
    }
  } finally {
    stopKeys();
    view?.done();
  }
  context.exitCode = ExitCode.success;
}

/** `q`, Ctrl-C or Ctrl-D on the terminal ends the view (raw mode: keys come as typed). */
function listenForQuit(context: CliContext, quit: AbortController): () => void {
  const stdin = (context.stdinStream?.() ?? process.stdin) as NodeJS.ReadStream;
  if (!stdin.isTTY || typeof stdin.setRawMode !== "function") return () => undefined;
  stdin.setRawMode(true);
  const onData = (data: Buffer): void => {
    const key = data.toString("utf8");
    if (key === "q" || key === "Q" || key === "\u0003" || key === "\u0004") quit.abort();
  };
  stdin.on("data", onData);
  stdin.resume();
  return () => {
    stdin.off("data", onData);
    stdin.setRawMode(false);
    stdin.pause();
  };
}

/** Options `top` and `ps --watch` share. */
export function addTopOptions(command: Command): Command {
  return command
    .option("--interval <seconds>", "seconds between refreshes", "2")
    .option("-n, --iterations <count>", "stop after this many snapshots (default: until q)");
}

export function registerTopCommand(program: Command, context: CliContext): void {
  addTopOptions(
    program
      .command("top")
      .description(
        "a live view of runs and sandboxes: state, CPU, memory, disk budget use, egress refusals and what each run is doing, refreshed in place (q quits); plain snapshots when not a terminal",
      ),
  )
    .option("--json", "one JSON snapshot a line")
    .option("--wide", "every column, however wide the terminal")
    .action((options: TopOptions) => watchTop(context, options));
}
