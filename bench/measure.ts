import { performance } from "node:perf_hooks";

/** Summary of repeated timings, in milliseconds. */
export interface Timing {
  runs: number;
  medianMs: number;
  p95Ms: number;
  minMs: number;
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

export function summarise(samples: number[]): Timing {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number): number =>
    sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return {
    runs: sorted.length,
    medianMs: round(at(0.5)),
    p95Ms: round(at(0.95)),
    minMs: round(sorted[0] ?? NaN),
  };
}

/** Runs `fn` `warmup` times untimed, then `runs` times timed, one after another. */
export async function time(fn: () => Promise<unknown>, runs: number, warmup = 2): Promise<Timing> {
  for (let i = 0; i < warmup; i += 1) await fn();
  const samples: number[] = [];
  for (let i = 0; i < runs; i += 1) {
    const started = performance.now();
    await fn();
    samples.push(performance.now() - started);
  }
  return summarise(samples);
}

/** A figure beside its baseline from the same run; ratio > 1 means cordon is slower. */
export interface Comparison {
  cordon: Timing;
  baseline: Timing;
  baselineName: string;
  ratio: number;
}

export function compare(cordon: Timing, baseline: Timing, baselineName: string): Comparison {
  return { cordon, baseline, baselineName, ratio: round(cordon.medianMs / baseline.medianMs) };
}
