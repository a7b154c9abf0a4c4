import type { Comparison } from "./measure.js";
import type { FigureName } from "./options.js";

/** One comparison of a figure: what was measured, cordon's timing beside the baseline's. */
export interface FigureComparison extends Comparison {
  /** What one timed run does, e.g. "exec true" or "10 MiB write + read". */
  measures: string;
  /** The budget of issue 4 for this ratio, where it sets one; informative, never asserted. */
  target?: { maxRatio: number; met: boolean };
}

/** `comparison` with the budget `maxRatio` it is held to. */
export function withTarget(comparison: FigureComparison, maxRatio: number): FigureComparison {
  return { ...comparison, target: { maxRatio, met: comparison.ratio <= maxRatio } };
}

/** One figure of DESIGN.md §8. */
export interface FigureResult {
  name: FigureName;
  title: string;
  comparisons: FigureComparison[];
  /** Operations of cordon's side that failed (an error, a non-zero exit, wrong bytes). */
  failures: number;
  /** Extra numbers: loads, memory, per-phase times. Units are in the key names. */
  details: Record<string, number | string>;
  /** Set when the figure could not be measured at all. */
  error?: string;
  /** Set when the figure does not apply to this engine (e.g. no runsc); not a failure. */
  skipped?: string;
}

export interface BenchReport {
  version: 1;
  runId: string;
  quick: boolean;
  startedAt: string;
  durationMs: number;
  environment: {
    node: string;
    platform: string;
    cpus: number;
    dockerServer: string;
    dockerApi: string;
    image: string;
  };
  figures: FigureResult[];
  /** Failures over all figures, plus one for each figure that could not be measured. */
  failures: number;
}

function pad(text: string, width: number): string {
  return text.length >= width ? text : text + " ".repeat(width - text.length);
}

function padStart(text: string, width: number): string {
  return text.length >= width ? text : " ".repeat(width - text.length) + text;
}

/** The report as a short table for people (stderr); the JSON on stdout is the record. */
export function renderTable(report: BenchReport): string {
  const rows: string[][] = [
    ["figure", "measures", "cordon ms", "baseline ms", "ratio", "target", "baseline"],
  ];
  for (const figure of report.figures) {
    if (figure.error) {
      rows.push([figure.name, `FAILED: ${figure.error}`, "", "", "", "", ""]);
      continue;
    }
    if (figure.skipped) {
      rows.push([figure.name, `skipped: ${figure.skipped}`, "", "", "", "", ""]);
      continue;
    }
    for (const comparison of figure.comparisons) {
      rows.push([
        figure.name,
        comparison.measures,
        comparison.cordon.medianMs.toFixed(1),
        comparison.baseline.medianMs.toFixed(1),
        comparison.ratio.toFixed(2),
        comparison.target
          ? `≤${comparison.target.maxRatio.toFixed(2)} ${comparison.target.met ? "met" : "MISSED"}`
          : "",
        comparison.baselineName,
      ]);
    }
  }
  const widths = rows[0]?.map((_, column) =>
    Math.max(...rows.map((row) => (row[column] ?? "").length)),
  );
  const numeric = new Set([2, 3, 4]);
  const lines = rows.map((row) =>
    row
      .map((cell, column) => {
        const width = widths?.[column] ?? 0;
        return numeric.has(column) ? padStart(cell, width) : pad(cell, width);
      })
      .join("  ")
      .trimEnd(),
  );
  const notes = report.figures.flatMap((figure) =>
    Object.keys(figure.details).length > 0 || figure.failures > 0
      ? [
          `${figure.name}: failures ${figure.failures}; ${Object.entries(figure.details)
            .map(([key, value]) => `${key} ${value}`)
            .join(", ")}`,
        ]
      : [],
  );
  const header = `cordon bench${report.quick ? " (--quick: a smoke run, not numbers to quote)" : ""}; medians; ratio > 1 means cordon is slower`;
  return [header, ...lines, ...notes].join("\n");
}
