/**
 * `npm run bench` in its smoke form: one figure, --quick, on a real engine. Checks the report's
 * shape and that the run leaves no container behind; never how fast anything was.
 */
import { describe, expect, it } from "vitest";

import { BenchUsageError, parseBenchArgs } from "../../bench/options.js";
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
    expect(parseBenchArgs([])?.figures).toHaveLength(5);
    expect(parseBenchArgs(["--help"])).toBeUndefined();
    expect(() => parseBenchArgs(["--only", "warm"])).toThrow(BenchUsageError);
    expect(() => parseBenchArgs(["--fast"])).toThrow(BenchUsageError);
  });
});
