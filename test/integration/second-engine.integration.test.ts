import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { startSecondEngine, type SecondEngine } from "../support/second-engine.js";

interface Report {
  ok: boolean;
  checks: { name: string; status: string; detail: string; fix?: string }[];
}

/**
 * cordon against a real second Docker engine with its own filesystem (Debian's dockerd in a
 * container, test/support/second-engine.ts), over TCP+TLS and over ssh: what works there today —
 * doctor, the sandbox image on that engine — and what is refused before anything is made.
 */
describe("a second engine with its own filesystem", () => {
  let root: string;
  let home: string;
  let engine: SecondEngine;
  let sandboxImage: string;
  const env = (more: NodeJS.ProcessEnv): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    HOME: root,
    DOCKER_HOST: "",
    DOCKER_CONTEXT: "",
    DOCKER_CONFIG: "",
    DOCKER_TLS_VERIFY: "",
    DOCKER_CERT_PATH: "",
    ...more,
  });
  const transports = () =>
    [
      ["TLS", engine.tlsEnv, `${engine.tlsHost} (TLS), from DOCKER_HOST`],
      ["ssh", engine.sshEnv, `${engine.sshHost}, from DOCKER_HOST`],
    ] as const;

  beforeAll(async () => {
    sandboxImage = await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-second-engine-"));
    home = path.join(root, "state");
    engine = await startSecondEngine({ directory: path.join(root, "engine") });
  }, 300_000);

  afterAll(async () => {
    await engine?.stop();
    await rm(root, { recursive: true, force: true });
  });

  it("doctor names the engine over TLS and ssh and says it does not share this host's filesystem", async () => {
    for (const [, transport, where] of transports()) {
      const doctor = await runCordon(["doctor", "--json"], env(transport));
      const report = JSON.parse(doctor.stdout) as Report;
      const check = (name: string) => report.checks.find((c) => c.name === name);
      expect(check("docker")?.status, doctor.stdout).toBe("ok");
      expect(check("engine")?.status).toBe("fail");
      expect(check("engine")?.detail).toContain(`${where}: elsewhere`);
      expect(check("engine")?.detail).toContain("not sharing this host's filesystem");
      // Its own images: the sandbox image this host has is not there until it is loaded.
      expect(check("image")?.status).not.toBe("ok");
    }
  });

  it("refuses a sandbox with exit 2 naming the fix, and makes nothing on either engine", async () => {
    const repo = await demoRepo();
    for (const [name, transport] of transports()) {
      const exec = await runCordon(
        ["exec", "--workspace", repo, "--session", `second-${name}`, "--", "true"],
        env(transport),
      );
      expect(exec.exitCode, exec.stderr).toBe(2);
      expect(exec.stderr).toMatch(/does not share this host's filesystem/);
      expect(exec.stderr).toMatch(/fix: .*unset DOCKER_HOST/);
    }
    expect(await engine.client.listContainers({ all: true })).toEqual([]);
    const local = await dockerClient().listContainers({
      all: true,
      filters: { label: [`cordon.home=${home}`] },
    });
    expect(local).toEqual([]);
    expect(await readdir(path.join(home, "workspaces")).catch(() => [])).toEqual([]);
  });

  it("finds the sandbox image on that engine once it is there, without building it again", async () => {
    // A new engine has no base image, and no registry to pull one from here: the fix is named.
    const before = await runCordon(["image", "status"], env(engine.sshEnv));
    expect(before.exitCode).toBe(3);
    expect(before.stderr).toMatch(/no base image for the sandbox image/);
    expect(before.stderr).toMatch(/fix: .*CORDON_BASE_IMAGE/);
    await engine.loadImages(["cordon-base:bookworm", sandboxImage]);
    const after = await runCordon(["image", "status"], env(engine.sshEnv));
    expect(after.stdout).toContain(`${sandboxImage} current`);
    const setup = await runCordon(["setup"], env(engine.tlsEnv));
    expect(setup.stderr).toMatch(/Docker engine 20\.10/);
    expect(setup.stderr).not.toMatch(/Step \d+\/\d+/);
    // The doctor part of setup says the engine is elsewhere: a sandbox is refused there today.
    expect(setup.stdout).toMatch(/elsewhere/);
    expect((await engine.client.getImage(sandboxImage).inspect()).Id).toBe(
      (await dockerClient().getImage(sandboxImage).inspect()).Id,
    );
  });
});
