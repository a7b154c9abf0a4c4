/** The figures of DESIGN.md §8, in the order they run. */
export const figureNames = [
  "warm-exec",
  "first-result",
  "pool",
  "seeded-session",
  "carry",
  "changes",
  "checkpoints",
  "fork",
  "files",
  "concurrency",
  "agent-loop",
  "long-session",
  "mcp",
  "egress",
  "gvisor",
  "volumes",
] as const;

export type FigureName = (typeof figureNames)[number];

export interface BenchOptions {
  /** Fewer runs and smaller loads: a smoke run for CI, not numbers to quote. */
  quick: boolean;
  /** The figures to run, in the standard order; all of them by default. */
  figures: FigureName[];
}

export const usage = `usage: npm run bench -- [--quick] [--only NAME[,NAME…]]

Prints JSON on stdout (each figure beside its baseline from the same run, as ratios) and a
table on stderr. Needs a Docker engine and the built-in sandbox image (bash scripts/setup.sh).

  --quick        fewer runs and smaller loads (a smoke run; do not quote its numbers)
  --only NAME    run only these figures (repeatable, or comma-separated): ${figureNames.join(", ")}
  -h, --help     this text`;

export class BenchUsageError extends Error {}

function isFigureName(value: string): value is FigureName {
  return (figureNames as readonly string[]).includes(value);
}

/** Parses the arguments after `npm run bench --`; undefined when help was asked for. */
export function parseBenchArgs(args: readonly string[]): BenchOptions | undefined {
  let quick = false;
  const only = new Set<FigureName>();
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i] ?? "";
    if (arg === "-h" || arg === "--help") return undefined;
    if (arg === "--quick") {
      quick = true;
      continue;
    }
    const inline = arg.startsWith("--only=") ? arg.slice("--only=".length) : undefined;
    if (arg === "--only" || inline !== undefined) {
      const value = inline ?? args[(i += 1)];
      if (!value) throw new BenchUsageError("--only needs a figure name");
      for (const name of value.split(",").map((part) => part.trim())) {
        if (!isFigureName(name)) {
          throw new BenchUsageError(
            `unknown figure "${name}"; the figures are ${figureNames.join(", ")}`,
          );
        }
        only.add(name);
      }
      continue;
    }
    throw new BenchUsageError(`unknown argument "${arg}"`);
  }
  const figures = only.size > 0 ? figureNames.filter((name) => only.has(name)) : [...figureNames];
  return { quick, figures };
}
