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

/**
 * Times several contenders in turns (a, b, c, a, b, c, …) rather than one block after another,
 * so a noisy neighbour or a slow minute of the machine weighs on all of them alike. Each gets
 * `warmup` untimed runs first. `fn(i)` gets the run's index (untimed runs have negative ones).
 */
export async function timeInTurns<K extends string>(
  contenders: Record<K, (run: number) => Promise<unknown>>,
  runs: number,
  warmup = 2,
): Promise<Record<K, Timing>> {
  const keys = Object.keys(contenders) as K[];
  for (let i = 0; i < warmup; i += 1) {
    for (const key of keys) await contenders[key](-1 - i);
  }
  const samples = Object.fromEntries(keys.map((key) => [key, [] as number[]])) as Record<
    K,
    number[]
  >;
  for (let i = 0; i < runs; i += 1) {
    // Rotate who goes first, so none always runs right after another's cleanup.
    for (let k = 0; k < keys.length; k += 1) {
      const key = keys[(i + k) % keys.length] as K;
      const started = performance.now();
      await contenders[key](i);
      samples[key].push(performance.now() - started);
    }
  }
  return Object.fromEntries(keys.map((key) => [key, summarise(samples[key])])) as Record<K, Timing>;
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

/**
 * The highest resident set size of this process while it runs, sampled every `everyMs`:
 * `resourceUsage().maxRSS` is the peak of the whole process life, which cannot tell two phases
 * of one run apart.
 */
export class PeakMemory {
  #peakBytes = 0;
  #timer: NodeJS.Timeout | undefined;

  start(everyMs = 5): void {
    collectGarbage();
    this.#peakBytes = process.memoryUsage.rss();
    this.#timer = setInterval(() => this.sample(), everyMs);
  }

  /** Stops sampling; the peak in bytes. */
  stop(): number {
    clearInterval(this.#timer);
    this.sample();
    return this.#peakBytes;
  }

  private sample(): void {
    this.#peakBytes = Math.max(this.#peakBytes, process.memoryUsage.rss());
  }
}

/** Collects garbage when node runs with --expose-gc (npm run bench does), so phases start even. */
export function collectGarbage(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
}

export function mebibytes(bytes: number): number {
  return Math.round((bytes / 1024 / 1024) * 10) / 10;
}
