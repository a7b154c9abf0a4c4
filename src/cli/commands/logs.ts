import type { Command } from "commander";

import { processState, sleep } from "../../common/index.js";
import {
  readRunEvents,
  readSessionLock,
  sessionFiles,
  type RunEventRecord,
} from "../../runner/index.js";
import type { CliContext } from "../context.js";
import { printableLines } from "../printable.js";
import { liveLineOf, type LiveLine } from "../render/live-line.js";
import { createRunRenderer, type RunRenderer } from "../render/run-renderer.js";
import { resolveSession } from "../resolve-session.js";
import type { PlanFlags } from "../runner-flags.js";

interface LogsFlags extends PlanFlags {
  follow?: boolean;
  json?: boolean;
}

/** How often `--follow` looks for new events. */
const followPollMs = 200;

/**
 * Prints records as `cordon run` would have: JSONL envelopes with `--json`, else the text
 * rendering of each run (everything to stdout: here the events are the command's result), under
 * a header line per run. The text of a model call comes from its `assistant-message` (the file
 * keeps no deltas).
 *
 * The records hold what the agent and its container wrote (answers, commands, outputs, errors):
 * in text mode every line is shown through `printableLines`, so a stored escape sequence or CR is
 * printed as `\u001b`/`\u000d`, never obeyed by the terminal of whoever reads the log.
 */
function createLogPrinter(
  context: CliContext,
  json: boolean,
  live: LiveLine | undefined,
): (record: RunEventRecord) => void {
  let renderer: RunRenderer | undefined;
  const stdout = (text: string): void => {
    live?.clear();
    context.stdout(printableLines(text));
  };
  return (record) => {
    if (json) {
      context.stdout(`${JSON.stringify(record)}\n`);
      return;
    }
    if (record.type === "run-start" || renderer === undefined) {
      stdout(`── run ${record.runId} · ${record.ts} ──\n`);
      renderer = createRunRenderer({
        format: "text",
        stdout,
        stderr: stdout,
        narrationShowsAnswer: true,
        live,
      });
    }
    if (record.type === "assistant-message") {
      const message = record["message"] as { content?: { type: string; text?: string }[] };
      const text = (message.content ?? [])
        .filter((block) => block.type === "text" && block.text)
        .map((block) => block.text)
        .join("\n");
      const delta = { type: "text-delta", text };
      if (text) renderer.onEvent(delta);
    }
    renderer.onEvent(record);
    if (record.type === "run-end") {
      const usage = record["usage"] as { inputTokens?: number; outputTokens?: number } | undefined;
      const tokens = (usage?.inputTokens ?? 0) + (usage?.outputTokens ?? 0);
      stdout(
        `── ended: ${String(record["status"])} · ${String(record["turns"])} turns · ${tokens} tokens ──\n`,
      );
    }
  };
}

export function registerLogsCommand(program: Command, context: CliContext): void {
  program
    .command("logs")
    .description(
      "a session's run events (tool calls, results, answers, how each run ended); -f follows a run in progress until it ends",
    )
    .option(
      "--session <name>",
      "session key, name or unique prefix (default: the agent's main session)",
    )
    .option("--agent <id>", "agent from the config (default: the default agent)")
    .option("--config <path>", "config file (default: CORDON_CONFIG, else ./cordon.json5)")
    .option(
      "--workspace <dir>",
      "the project whose sessions to use (default: the config's workspace, else the current directory)",
    )
    .option("-f, --follow", "keep printing the events of the run in progress until it ends")
    .option("--json", "print the stored records (the stream-json envelopes) as JSONL")
    .action(async (flags: LogsFlags) => {
      const { stateDir, project, sessionKey } = await resolveSession(
        context,
        flags,
        flags.session ?? "main",
      );
      const files = sessionFiles(stateDir, sessionKey, project);
      // Following a run: its running command's last line, drawn raw (the renderer made it
      // printable) since `stdout` above shows cursor codes as text.
      const live = flags.follow && !flags.json ? liveLineOf(context, "stdout") : undefined;
      const print = createLogPrinter(context, flags.json === true, live);

      // The run to follow is the one holding the session now; read before the events, so its
      // run-end cannot slip between reading the events and looking at the lock.
      const holder = flags.follow ? await readSessionLock(files.lock) : undefined;
      const following = holder && processState(holder) !== "dead" ? holder.runId : undefined;
      let { records, next } = await readRunEvents(files.events);
      let ended = false;
      const show = (batch: RunEventRecord[]): void => {
        for (const record of batch) {
          print(record);
          if (record.type === "run-end" && record.runId === following) ended = true;
        }
      };
      show(records);
      if (!flags.follow) {
        if (records.length === 0) context.stderr(`no events recorded for session ${sessionKey}\n`);
        return;
      }
      if (following === undefined) {
        context.stderr(`no run in progress on session ${sessionKey}\n`);
        return;
      }
      while (!ended) {
        await sleep(followPollMs);
        ({ records, next } = await readRunEvents(files.events, next));
        show(records);
        if (ended || records.length > 0) continue;
        const current = await readSessionLock(files.lock);
        if (current?.runId === following && processState(current) !== "dead") continue;
        // The run let go of the session: its last events are written before that.
        show((await readRunEvents(files.events, next)).records);
        live?.clear();
        if (!ended) {
          context.stderr(
            `the run ${following} stopped without recording its end (its process was killed)\n`,
          );
        }
        return;
      }
    });
}
