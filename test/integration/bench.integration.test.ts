/**
 * `npm run bench` in its smoke form: one figure, --quick, on a real engine. Checks the report's
 * shape and that the run leaves no container behind; never how fast anything was.
 */
import { describe, expect, it } from "vitest";

import { summarise, timeInTurns } from "../../bench/measure.js";
import { BenchUsageError, figureNames, parseBenchArgs } from "../../bench/options.js";
import type { BenchReport } from "../../bench/report.js";
import { renderTable } from "../../bench/report.js";
import { runBench } from "../../bench/run.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";

describe("npm run bench", () => {
  it("--quick --only warm-exec reports finite positive ratios, no failures, and cleans up", async () => {
    await requireSandboxImage();
    const progress: string[] = [];
    const report = await runBench({
      quick: true,
      figures: ["warm-exec"],
      progress: (line) => progress.push(line),
    });
    // What main prints is this object as JSON: check it survives the trip.
    const printed = JSON.parse(JSON.stringify(report)) as BenchReport;

    expect(printed.version).toBe(1);
    expect(printed.quick).toBe(true);
    expect(printed.figures.map((figure) => figure.name)).toEqual(["warm-exec"]);
    const figure = printed.figures[0];
    expect(figure?.error).toBeUndefined();
    expect(figure?.failures).toBe(0);
    expect(printed.failures).toBe(0);
    expect(figure?.comparisons.length).toBeGreaterThanOrEqual(2);
    for (const comparison of figure?.comparisons ?? []) {
      expect(Number.isFinite(comparison.ratio)).toBe(true);
      expect(comparison.ratio).toBeGreaterThan(0);
      expect(comparison.cordon.runs).toBeGreaterThan(0);
      expect(comparison.baselineName).not.toBe("");
    }
    expect(progress.length).toBeGreaterThan(0);
    expect(renderTable(printed)).toContain("warm-exec");

    const left = await dockerClient().listContainers({
      all: true,
      filters: { label: [`cordon.bench.run=${printed.runId}`] },
    });
    expect(left.map((container) => container.Names.join(","))).toEqual([]);
  });

  it("parses --quick and --only, and refuses unknown figures", () => {
    expect(parseBenchArgs(["--quick", "--only=files,warm-exec"])).toEqual({
      quick: true,
      figures: ["warm-exec", "files"],
    });
    expect(parseBenchArgs(["--only", "agent-loop"])?.figures).toEqual(["agent-loop"]);
    expect(parseBenchArgs([])?.figures).toEqual([...figureNames]);
    expect(figureNames).toContain("carry");
    expect(parseBenchArgs(["--help"])).toBeUndefined();
    expect(() => parseBenchArgs(["--only", "warm"])).toThrow(BenchUsageError);
    expect(() => parseBenchArgs(["--fast"])).toThrow(BenchUsageError);
  });

  it("times contenders in rotating turns after warm-up, with cleanup outside the clock", async () => {
    const calls: string[] = [];
    const contender = (name: string) => (run: number) => {
      calls.push(`${name}${run}`);
      return Promise.resolve(() => {
        calls.push(`${name}${run}-cleanup`);
        return Promise.resolve();
      });
    };
    const timings = await timeInTurns({ a: contender("a"), b: contender("b") }, 2, 1);
    expect(calls).toEqual([
      "a-1",
      "a-1-cleanup",
      "b-1",
      "b-1-cleanup",
      "a0",
      "a0-cleanup",
      "b0",
      "b0-cleanup",
      "b1",
      "b1-cleanup",
      "a1",
      "a1-cleanup",
    ]);
    expect(timings.a.runs).toBe(2);
    expect(timings.b.runs).toBe(2);
    expect(summarise([5, 1, 3, 2, 4])).toEqual({ runs: 5, medianMs: 3, p95Ms: 5, minMs: 1 });
  });
});
