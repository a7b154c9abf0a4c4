import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";

import {
  ScriptedModelClient,
  createRunner,
  type ModelClient,
  type ModelRequest,
  type ModelStreamEvent,
  type Runner,
  type SandboxProvider,
} from "../../src/runner/index.js";
import { releaseWorkspaceDisksBelow } from "../../src/sandbox/index.js";
import type { BenchContext } from "../context.js";
import { summarise, type Timing } from "../measure.js";
import type { FailureCount } from "./failures.js";

/**
 * What a model's answer takes here: a stand-in for a real model's turn (a short tool-calling answer
 * from a hosted model takes one to several seconds), so a checkpoint that overlaps the model
 * call shows what it costs a turn when the model is not instant.
 */
export const modelDelayMs = 1000;

/** Each turn's tool: one exec that rewrites ten files (as the record figure changes ten). */
const changeTen = {
  content: [
    {
      type: "tool_use" as const,
      name: "exec",
      input: {
        command:
          'for i in 0 1 2 3 4 5 6 7 8 9; do echo "// turn $RANDOM$RANDOM" > src/module$i/file0.ts; done',
      },
    },
  ],
};
const endTurn = { content: [{ type: "text" as const, text: "done" }] };

/** The scripted model, answering each request after `modelDelayMs`. */
class SlowModel implements ModelClient {
  readonly provider = "scripted";
  readonly #inner: ScriptedModelClient;

  constructor(turns: number, runs: number) {
    const run = [...Array.from({ length: turns }, () => changeTen), endTurn];
    this.#inner = new ScriptedModelClient({
      version: 1,
      turns: Array.from({ length: runs }, () => run).flat(),
    });
  }

  async *stream(request: ModelRequest): AsyncGenerator<ModelStreamEvent> {
    await sleep(modelDelayMs, undefined, { signal: request.signal });
    yield* this.#inner.stream(request);
  }
}

/** Turn times of runs with per-turn checkpoints and without, measured alike. */
export interface TurnLatency {
  withCheckpoints: Timing;
  without: Timing;
  turnsPerRun: number;
  /** The records' own time in those runs (`checkpoint` events' `recordMs`), beside the model. */
  recordInRun: Timing;
  /** What the turns' tools waited for them (`durationMs`). */
  waitedInRun: Timing;
}

/**
 * Runs the agent loop (`createRunner().run`, the real manager, a seeded copy of `repository`)
 * with `sandbox.checkpoints` "turn" and "off", a run of each in turn so load weighs on both
 * alike. A turn is the time between consecutive tool results: the model's `modelDelayMs`, the
 * session writes, the checkpoint (or none), the exec. The first turn of a run carries the run's
 * start and is left out.
 */
export async function turnLatency(
  ctx: BenchContext,
  repository: string,
  failures: FailureCount,
): Promise<TurnLatency> {
  const turnsPerRun = ctx.quick ? 3 : 6;
  const rounds = ctx.quick ? 1 : 3;
  const home = await mkdtemp(path.join(tmpdir(), "cordon-bench-checkpoint-turns-"));
  const sandboxes: SandboxProvider = {
    async acquire(plan, options) {
      if (!plan.sandbox.spec) throw new Error("the bench configuration must be sandboxed");
      return ctx.manager.acquire(plan.sandbox.spec, options);
    },
  };
  const runnerFor = (checkpoints: "turn" | "off", model: ModelClient): Runner =>
    createRunner({
      cwd: repository,
      env: { CORDON_HOME: home, CORDON_CONFIG: "" },
      workspace: repository,
      configOverrides: { agents: { defaults: { sandbox: { seed: true, checkpoints } } } },
      sandboxes,
      model,
    });
  // One extra run each to create the container and seed the copy, untimed.
  const variants = (["turn", "off"] as const).map((checkpoints) => ({
    checkpoints,
    sessionKey: ctx.sessionKey(`checkpoint-turns-${checkpoints}`),
    runner: runnerFor(checkpoints, new SlowModel(turnsPerRun, rounds + 1)),
    turns: [] as number[],
  }));
  const recordMs: number[] = [];
  const waitedMs: number[] = [];
  try {
    for (let round = 0; round <= rounds; round += 1) {
      for (const variant of round % 2 === 0 ? variants : [...variants].reverse()) {
        const resultsAt: number[] = [];
        const run = await variant.runner.run({
          prompt: "Change ten files a turn.",
          sessionKey: variant.sessionKey,
          limits: { maxTurns: turnsPerRun + 3 },
          signal: ctx.signal,
          onEvent: (event) => {
            if (event.type === "tool-result") resultsAt.push(performance.now());
            if (event.type === "tool-result" && event.isError) failures.count += 1;
            if (event.type !== "checkpoint") return;
            if (event.error !== undefined) {
              failures.count += 1;
              failures.first ??= `a turn's checkpoint failed: ${event.error}`;
            }
            // The first carries the spare inspector's start and the run's first record.
            if (round > 0 && event.turn > 1 && event.recordMs !== undefined) {
              recordMs.push(event.recordMs);
              waitedMs.push(event.durationMs);
            }
          },
        });
        if (run.status !== "completed") {
          failures.count += 1;
          failures.first ??= `the run ended ${run.status}: ${run.message ?? ""}`;
        }
        if (round === 0) continue;
        for (let i = 1; i < resultsAt.length; i += 1) {
          variant.turns.push((resultsAt[i] ?? NaN) - (resultsAt[i - 1] ?? NaN));
        }
      }
    }
    const [withCheckpoints, without] = variants;
    return {
      withCheckpoints: summarise(withCheckpoints?.turns ?? []),
      without: summarise(without?.turns ?? []),
      turnsPerRun,
      recordInRun: summarise(recordMs),
      waitedInRun: summarise(waitedMs),
    };
  } finally {
    for (const variant of variants) {
      const spec = (await variant.runner.plan({ sessionKey: variant.sessionKey })).sandbox.spec;
      if (!spec) continue;
      await ctx.inventory
        .remove(spec.containerName, { discardChanges: true })
        .catch(() => undefined);
    }
    // The copies may be mounted images (sandbox.disk): unmounted before they are removed.
    await releaseWorkspaceDisksBelow(home).catch(() => undefined);
    await rm(home, { recursive: true, force: true });
  }
}
