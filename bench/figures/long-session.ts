import { performance } from "node:perf_hooks";

import type { BenchContext } from "../context.js";
import { collectGarbage, mebibytes, summarise } from "../measure.js";
import type { FigureResult } from "../report.js";
import { FailureCount, execOk } from "./failures.js";

/**
 * Figure 8: one sandbox through a long session, `calls` sequential tool calls (exec, write, read,
 * stat in turn), as an agent makes them. No drift means the last 100 calls cost what the first
 * 100 did (ratio ≈ 1; the budget allows 1.25 for a loaded machine); bounded memory means
 * cordon's RSS and, with the resident executor, the executor's RSS inside the container end
 * where they settled after the first calls.
 */
export async function longSession(ctx: BenchContext): Promise<FigureResult> {
  const calls = ctx.quick ? 200 : 1000;
  const window = ctx.quick ? 20 : 100;
  const spec = await ctx.spec("long-session");
  const lease = await ctx.manager.acquire(spec, { signal: ctx.signal });
  const sandbox = lease.sandbox;
  const failures = new FailureCount();
  const content = new Uint8Array(1024).fill(0x61);
  const path = `${sandbox.workdir}/long-session.txt`;
  const call = async (index: number): Promise<void> => {
    switch (index % 4) {
      case 0:
        await execOk(sandbox, "true", ctx.signal);
        break;
      case 1:
        await sandbox.files.writeFile(path, content, { signal: ctx.signal });
        break;
      case 2:
        await sandbox.files.readFile(path, { signal: ctx.signal });
        break;
      default:
        await sandbox.files.stat(path, { signal: ctx.signal });
    }
  };
  /** The executor's resident set inside the container, in KiB (0 without one). */
  const executorRssKib = async (): Promise<number> => {
    const result = await sandbox.exec(
      "pid=$(pgrep -x executor | head -n 1); [ -n \"$pid\" ] && awk '/^VmRSS/ {print $2}' /proc/$pid/status || echo 0",
    );
    return Number(result.stdout.trim()) || 0;
  };
  try {
    ctx.progress(`long-session: ${calls} sequential tool calls (exec, write, read, stat)`);
    for (let i = 0; i < 8; i += 1) await failures.guard(() => call(i));
    collectGarbage();
    const rssStart = process.memoryUsage.rss();
    const executorStart = await executorRssKib();
    const samples: number[] = [];
    for (let i = 0; i < calls; i += 1) {
      ctx.signal.throwIfAborted();
      const started = performance.now();
      await failures.guard(() => call(i));
      samples.push(performance.now() - started);
    }
    collectGarbage();
    const rssEnd = process.memoryUsage.rss();
    const executorEnd = await executorRssKib();
    const first = summarise(samples.slice(0, window));
    const last = summarise(samples.slice(-window));
    const ratio = Math.round((last.medianMs / first.medianMs) * 1000) / 1000;
    return {
      name: "long-session",
      title: `${calls} sequential tool calls: latency drift and memory`,
      comparisons: [
        {
          measures: `last ${window} calls`,
          cordon: last,
          baseline: first,
          baselineName: `the first ${window} calls of the same session`,
          ratio,
          target: { maxRatio: 1.25, met: ratio <= 1.25 },
        },
      ],
      failures: failures.count,
      details: {
        calls,
        executor: spec.docker.executor ?? "exec",
        cordonRssStartMiB: mebibytes(rssStart),
        cordonRssEndMiB: mebibytes(rssEnd),
        executorRssStartKiB: executorStart,
        executorRssEndKiB: executorEnd,
        ...failures.details(),
      },
    };
  } finally {
    await lease.release();
    await ctx.baselines.removeContainer(lease.containerName);
  }
}
