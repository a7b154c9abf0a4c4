import { describe, expect, it } from "vitest";

import { statsFrom } from "./docker-container-client.js";

describe("a container's stats, as docker stats reads them", () => {
  it("takes the CPU share over the engine's sample, in cores × 100, and leaves the page cache out", () => {
    const stats = statsFrom({
      cpu_stats: {
        cpu_usage: { total_usage: 3_000_000_000 },
        system_cpu_usage: 20_000_000_000,
        online_cpus: 2,
      },
      precpu_stats: { cpu_usage: { total_usage: 2_000_000_000 }, system_cpu_usage: 18_000_000_000 },
      // cgroups v1 names the reclaimable cache total_inactive_file.
      memory_stats: { usage: 300, limit: 1000, stats: { total_inactive_file: 100 } },
    });
    expect(stats).toEqual({ cpuPercent: 100, memoryBytes: 200, memoryLimitBytes: 1000 });
  });

  it("reads 0 % from a first sample with nothing before it, and v2's inactive_file", () => {
    const stats = statsFrom({
      cpu_stats: { cpu_usage: { total_usage: 5 }, system_cpu_usage: 10 },
      memory_stats: { usage: 50, limit: 80, stats: { inactive_file: 10 } },
    });
    expect(stats.cpuPercent).toBe(0);
    expect(stats.memoryBytes).toBe(40);
  });
});
