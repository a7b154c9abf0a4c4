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

/** Runs `fn` `warmup` times untimed, then `runs` times timed; the times in milliseconds. */
export async function sample(
  fn: () => Promise<unknown>,
  runs: number,
  warmup = 2,
): Promise<number[]> {
  for (let i = 0; i < warmup; i += 1) await fn();
  const samples: number[] = [];
  for (let i = 0; i < runs; i += 1) {
    const started = performance.now();
    await fn();
    samples.push(performance.now() - started);
  }
  return samples;
}

/** Runs `fn` `warmup` times untimed, then `runs` times timed, one after another. */
export async function time(fn: () => Promise<unknown>, runs: number, warmup = 2): Promise<Timing> {
  return summarise(await sample(fn, runs, warmup));
}

/**
 * One contender of `timeInTurns`: does run `run` (negative for untimed warm-up runs). When it
 * resolves to a function, that function is called after the clock stopped: cleanup (removing
 * a container) that a run needs but that is not part of what is measured.
 */
export type Contender = (run: number) => Promise<unknown>;

/**
 * Times several contenders in turns (a, b, c, b, c, a, …) rather than one block after another,
 * so a noisy neighbour or a slow minute of the machine weighs on all of them alike. Each gets
 * `warmup` untimed runs first.
 */
export async function timeInTurns<K extends string>(
  contenders: Record<K, Contender>,
  runs: number,
  warmup = 2,
): Promise<Record<K, Timing>> {
  const keys = Object.keys(contenders) as K[];
  const once = async (key: K, run: number): Promise<number> => {
    const started = performance.now();
    const after = await contenders[key](run);
    const elapsed = performance.now() - started;
    if (typeof after === "function") await (after as () => Promise<unknown>)();
    return elapsed;
  };
  for (let i = 0; i < warmup; i += 1) {
    for (const key of keys) await once(key, -1 - i);
  }
  const samples = Object.fromEntries(keys.map((key) => [key, [] as number[]])) as Record<
    K,
    number[]
  >;
  for (let i = 0; i < runs; i += 1) {
    // Rotate who goes first, so none always runs right after another's cleanup.
    for (let k = 0; k < keys.length; k += 1) {
      const key = keys[(i + k) % keys.length] as K;
      samples[key].push(await once(key, i));
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

/** What `PeakMemory` saw: resident set sizes in bytes. */
export interface MemoryPeak {
  /** RSS when sampling started (after a garbage collection, when node allows it). */
  startBytes: number;
  peakBytes: number;
}

/**
 * The highest resident set size of this process while it runs, sampled every `everyMs`:
 * `resourceUsage().maxRSS` is the peak of the whole process life, which cannot tell two phases
 * of one run apart. Compare phases by their growth (peak − start): RSS rarely shrinks, so a later
 * phase starts where an earlier one left it.
 */
export class PeakMemory {
  #startBytes = 0;
  #peakBytes = 0;
  #timer: NodeJS.Timeout | undefined;

  start(everyMs = 5): void {
    collectGarbage();
    this.#startBytes = process.memoryUsage.rss();
    this.#peakBytes = this.#startBytes;
    this.#timer = setInterval(() => this.sample(), everyMs);
  }

  stop(): MemoryPeak {
    clearInterval(this.#timer);
    this.sample();
    return { startBytes: this.#startBytes, peakBytes: this.#peakBytes };
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
