import { setMaxListeners } from "node:events";
import os from "node:os";
import { performance } from "node:perf_hooks";

import type { BenchContext } from "./context.js";
import { openBenchContext } from "./context.js";
import { concurrency } from "./figures/concurrency.js";
import { egressFigure } from "./figures/egress.js";
import { files } from "./figures/files.js";
import { agentLoop } from "./figures/agent-loop.js";
import { carry } from "./figures/carry.js";
import { changesFigure } from "./figures/changes.js";
import { checkpointsFigure } from "./figures/checkpoints.js";
import { firstResult } from "./figures/first-result.js";
import { forkFigure } from "./figures/fork.js";
import { poolFigure } from "./figures/pool.js";
import { gvisor } from "./figures/gvisor.js";
import { longSession } from "./figures/long-session.js";
import { mcpFigure } from "./figures/mcp.js";
import { seededSession } from "./figures/seeded-session.js";
import { volumesFigure } from "./figures/volumes.js";
import { warmExec } from "./figures/warm-exec.js";
import type { BenchOptions, FigureName } from "./options.js";
import type { BenchReport, FigureResult } from "./report.js";

const figures: Record<
  FigureName,
  { title: string; run: (ctx: BenchContext) => Promise<FigureResult> }
> = {
  "warm-exec": { title: "warm exec round trip", run: warmExec },
  "first-result": { title: "first result of a new session", run: firstResult },
  pool: { title: "first result of a new session from the warm pool", run: poolFigure },
  "seeded-session": { title: "a new session on a seeded copy", run: seededSession },
  carry: { title: "seeding with a ~150 MiB node_modules carried", run: carry },
  changes: { title: "the changes of a seeded copy (diff, fix-tests)", run: changesFigure },
  checkpoints: { title: "a checkpoint per turn of a seeded copy", run: checkpointsFigure },
  fork: { title: "a fork of a seeded copy (cordon fork)", run: forkFigure },
  files: { title: "write + read of 1 KiB and 10 MiB files", run: files },
  concurrency: { title: "32 concurrent sessions × 10 execs", run: concurrency },
  "agent-loop": { title: "agent-loop overhead per tool call", run: agentLoop },
  "long-session": { title: "1000 sequential tool calls: drift and memory", run: longSession },
  mcp: { title: "an MCP tool call (stdio, warm sandbox)", run: mcpFigure },
  egress: { title: "a request through the egress proxy", run: egressFigure },
  gvisor: { title: "gVisor (runsc) against runc", run: gvisor },
  volumes: { title: "the private copy in engine volumes against on this host", run: volumesFigure },
};

export interface RunBenchOptions extends BenchOptions {
  signal?: AbortSignal | undefined;
  progress?: ((message: string) => void) | undefined;
}

/**
 * Runs the chosen figures one after another in one bench context and returns the report. A
 * figure that throws is recorded with its error and the others still run. Every container the
 * run made is removed before this returns, also when it fails.
 */
export async function runBench(options: RunBenchOptions): Promise<BenchReport> {
  const started = performance.now();
  const startedAt = new Date().toISOString();
  // A signal of our own: 32 sessions × concurrent execs each listen on it, well past the
  // default of 10 listeners that node warns about.
  const signal = AbortSignal.any(options.signal ? [options.signal] : []);
  setMaxListeners(1000, signal);
  const ctx = await openBenchContext({ quick: options.quick, signal, progress: options.progress });
  try {
    const info = await ctx.engine.ping();
    const results: FigureResult[] = [];
    for (const name of options.figures) {
      signal.throwIfAborted();
      const figure = figures[name];
      try {
        // On Ctrl-C stop waiting at once: the cleanup below removes the containers from under
        // whatever the figure still has in flight, and main exits after it.
        results.push(await untilAborted(figure.run(ctx), signal));
      } catch (error) {
        if (signal.aborted) throw error;
        results.push({
          name,
          title: figure.title,
          comparisons: [],
          failures: 0,
          details: {},
          error: error instanceof Error ? error.message : String(error),
        });
      }
    }
    return {
      version: 1,
      runId: ctx.runId,
      quick: options.quick,
      startedAt,
      durationMs: Math.round(performance.now() - started),
      environment: {
        node: process.version,
        platform: `${os.platform()} ${os.release()} ${os.arch()}`,
        cpus: os.cpus().length,
        dockerServer: info.serverVersion,
        dockerApi: info.apiVersion,
        image: ctx.image,
      },
      figures: results,
      failures: results.reduce((sum, figure) => sum + figure.failures + (figure.error ? 1 : 0), 0),
    };
  } finally {
    await ctx.close();
  }
}

/** How long a figure interrupted by Ctrl-C gets to finish the step it is in. */
const figureSettleMs = 15_000;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** `work`, or a rejection with the signal's reason as soon as it aborts, whichever is first. */
async function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason as Error);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([work, aborted]);
  } catch (error) {
    if (signal.aborted) {
      // Figures check the signal before every step that creates something, so the one in
      // flight ends soon; wait for it (bounded), so the cleanup sees everything it made.
      await Promise.race([work.catch(() => undefined), sleep(figureSettleMs)]);
    }
    throw error;
  } finally {
    if (onAbort) signal.removeEventListener("abort", onAbort);
  }
}
