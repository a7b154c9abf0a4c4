import { describe, expect, it } from "vitest";

import { testSandboxSpec } from "../../../test/support/sandbox-spec.js";
import type { DockerSettings } from "../spec.js";
import { createContainerOptions } from "./container-options.js";
import { gvisorPlatform, isGvisorRuntime } from "./gvisor.js";

const optionsFor = (docker: Partial<DockerSettings>) =>
  createContainerOptions({
    spec: testSandboxSpec("gvisor", { docker: { runtime: undefined, ...docker } }),
    image: "cordon-sandbox:test",
    createdAt: "2026-01-01T00:00:00.000Z",
  }).HostConfig;

describe("container options under gVisor", () => {
  it.each([
    ["runsc", true],
    ["runsc-kvm", true],
    ["my-gvisor", true],
    ["runc", false],
    ["runscx", false],
    ["crun", false],
  ])("%s is gVisor: %s", (runtime, expected) => {
    expect(isGvisorRuntime(runtime)).toBe(expected);
  });

  it("under runc, the pids limit is Docker's and no nproc limit is added", () => {
    const host = optionsFor({ pidsLimit: 64 });
    expect(host?.PidsLimit).toBe(64);
    expect(host?.Ulimits).toEqual([]);
    expect(host?.Runtime).toBeUndefined();
  });

  it("under runsc, the pids limit becomes RLIMIT_NPROC, with room for the sentry's host threads", () => {
    const host = optionsFor({ runtime: "runsc", pidsLimit: 64 });
    expect(host?.Runtime).toBe("runsc");
    expect(host?.Ulimits).toEqual([{ Name: "nproc", Soft: 64, Hard: 64 }]);
    // Measured: 53 host tasks idle, 7–9 per process: the host limit must not be what a fork hits.
    expect(host?.PidsLimit).toBeGreaterThan(53 + 64 * 9);
  });

  it("under runsc, a tighter nproc the user set wins and other ulimits stay", () => {
    const host = optionsFor({
      runtime: "runsc",
      pidsLimit: 256,
      ulimits: [
        { name: "nproc", soft: 32, hard: 512 },
        { name: "nofile", soft: 1024, hard: 2048 },
      ],
    });
    expect(host?.Ulimits).toEqual([
      { Name: "nofile", Soft: 1024, Hard: 2048 },
      { Name: "nproc", Soft: 32, Hard: 256 },
    ]);
  });
});

describe("the gVisor platform doctor names", () => {
  it("is the registered --platform, else ptrace (runsc's own default)", () => {
    expect(gvisorPlatform(["--platform=kvm", "--network=host"])).toBe("kvm");
    expect(gvisorPlatform(["--network=host"])).toBe("ptrace");
    expect(gvisorPlatform([])).toBe("ptrace");
  });
});
