import type { Command } from "commander";

import { ConfigError } from "../../common/index.js";
import type { CliContext } from "../context.js";
import { withInterrupt } from "../interrupt.js";
import { addPlanOptions, runnerFromFlags, type PlanFlags } from "../runner-flags.js";
import { forkKeptPhase } from "../../runner/index.js";

interface ForkFlags extends PlanFlags {
  as?: string;
  count?: string;
  transcript?: boolean;
  json?: boolean;
}

/** `cordon fork` (docs/checkpoints.md, "Forks"). */
export function registerForkCommand(program: Command, context: CliContext): void {
  const fork = program
    .command("fork")
    .description(
      "make new sessions whose private copies start as a session's is now (each with its own container; their diffs are still against the repository)",
    );
  addPlanOptions(fork)
    .requiredOption(
      "--as <name>",
      "the new session's name (letters, digits, . _ -); with --count, names <name>-1 … <name>-N",
    )
    .option("--count <n>", "how many forks (1 to 32): <name>-1 … <name>-N")
    .option(
      "--no-transcript",
      "start each fork with an empty conversation (default: the parent's, with a note that it is a fork)",
    )
    .option("--json", "print the forks as JSON")
    .action(async (flags: ForkFlags) => {
      const count = countOf(flags.count);
      const runner = runnerFromFlags(context, flags);
      let kept = 0;
      const forks = await withInterrupt(
        context,
        (signal) =>
          runner.fork({
            agentId: flags.agent,
            sessionKey: flags.session,
            as: flags.as ?? "",
            count,
            transcript: flags.transcript,
            signal,
            onProgress: (progress) => {
              if (progress.phase === forkKeptPhase) kept += 1;
              context.stderr(`· ${progress.message}\n`);
            },
          }),
        () => forkStopLine(kept),
      );
      if (flags.json) {
        context.stdout(`${JSON.stringify({ forks })}\n`);
        return;
      }
      for (const made of forks) context.stdout(`${made.name}\t${made.sandbox}\n`);
      const first = forks[0]?.name ?? "";
      context.stderr(
        `forked ${forks.length} session(s): \`cordon run --session ${first} …\` works on one, \`cordon diff --session ${first}\` shows its changes since the repository\n`,
      );
    });
}

/** What an interrupted `cordon fork` leaves: `kept` forks stayed because they were in use. */
export function forkStopLine(kept: number): string {
  if (kept === 0) return "stopped: forks made so far were removed; the session is unchanged";
  const which = kept === 1 ? "one fork was kept: it was" : `${kept} forks were kept: they were`;
  return `stopped: the forks made so far were removed, but ${which} in use (named above); the session is unchanged`;
}

function countOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d{1,3}$/.test(text)) {
    throw new ConfigError(`--count takes a whole number, not ${JSON.stringify(text)}`, {
      fix: "--count 3 makes <name>-1, <name>-2 and <name>-3",
    });
  }
  return Number(text);
}
