/**
 * sandbox.docker.seccompProfile: a custom profile (a path in the config) is read and handed to the
 * engine as JSON, and it is in force inside the container — a syscall it denies fails there.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createContainerOptions } from "../../src/sandbox/docker/container-options.js";
import { readSeccompProfile } from "../../src/sandbox/docker/seccomp-profile.js";
import {
  dockerClient,
  execIn,
  removeContainer,
  requireSandboxImage,
  testLabel,
} from "../support/docker.js";
import { testSandboxSpec } from "../support/sandbox-spec.js";

describe("a custom seccomp profile", () => {
  let dir: string;
  let image: string;
  const created: Docker.Container[] = [];

  async function start(seccompProfile: string | undefined): Promise<Docker.Container> {
    const spec = testSandboxSpec("seccomp", { docker: { seccompProfile } });
    const container = await dockerClient().createContainer(
      createContainerOptions({
        spec,
        image,
        createdAt: new Date().toISOString(),
        extraLabels: testLabel,
        seccompProfileJson: await readSeccompProfile(spec),
      }),
    );
    created.push(container);
    await container.start();
    return container;
  }

  beforeAll(async () => {
    image = await requireSandboxImage();
    dir = await mkdtemp(path.join(tmpdir(), "cordon-seccomp-"));
  });
  afterAll(async () => {
    for (const container of created) await removeContainer(container);
    await rm(dir, { recursive: true, force: true });
  });

  it("denies what it denies inside the container; the default profile does not", async () => {
    const profile = path.join(dir, "no-mkdir.json");
    await writeFile(
      profile,
      JSON.stringify({
        defaultAction: "SCMP_ACT_ALLOW",
        syscalls: [{ names: ["mkdir", "mkdirat"], action: "SCMP_ACT_ERRNO" }],
      }),
    );
    const strict = await start(profile);
    const denied = await execIn(strict, ["mkdir", "/tmp/blocked"]);
    expect(denied.exitCode).not.toBe(0);
    expect(denied.stderr).toMatch(/Operation not permitted/);

    const plain = await start(undefined);
    expect((await execIn(plain, ["mkdir", "/tmp/allowed"])).exitCode).toBe(0);
  });

  it("a profile that is missing or not JSON is a clear error before any container exists", async () => {
    const missing = testSandboxSpec("seccomp", {
      docker: { seccompProfile: path.join(dir, "nope.json") },
    });
    await expect(readSeccompProfile(missing)).rejects.toThrow(/cannot read the seccomp profile/);
    const broken = path.join(dir, "broken.json");
    await writeFile(broken, "{ not json");
    const bad = testSandboxSpec("seccomp", { docker: { seccompProfile: broken } });
    await expect(readSeccompProfile(bad)).rejects.toThrow(/not valid JSON/);
  });
});
