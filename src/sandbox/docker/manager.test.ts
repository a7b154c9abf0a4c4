import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { testSandboxSpec } from "../../../test/support/sandbox-spec.js";
import { ImageError, SandboxError, createLogger, sleep } from "../../common/index.js";
import type { Sandbox } from "../sandbox.js";
import type { SandboxSpec } from "../spec.js";
import { fakeEngine } from "./client/testing/fake-engine.js";
import { labelKeys } from "./container-options.js";
import { holdFreezeUntilReleased } from "./testing/held-freeze.js";
import { DockerSandboxManager, type AcquireProgress, type ManagedContainer } from "./manager.js";
import { localBaseImage } from "./sandbox-image.js";

const image = "cordon-sandbox:test";
const imageId = "sha256:1111aaaa2222bbbb3333";

/**
 * The manager over a fake engine: what it asks of Docker, in order, with no engine running. The
 * branches of settling a container are settle-container.test.ts's; these are the manager's own.
 */
describe("DockerSandboxManager over a fake engine", () => {
  let home: string;
  let fake: ReturnType<typeof fakeEngine>;
  let manager: DockerSandboxManager;
  let made: ManagedContainer[];
  let spec: SandboxSpec;

  beforeEach(async () => {
    home = await mkdtemp(path.join(tmpdir(), "cordon-manager-unit-"));
    fake = fakeEngine();
    fake.images.set(image, { id: imageId, labels: {}, env: [] });
    fake.containers.imageIds.set(image, imageId);
    made = [];
    manager = new DockerSandboxManager({
      engine: fake.engine,
      stateDirectory: home,
      image,
      createSandbox: (container) => {
        made.push(container);
        return { id: container.containerName } as Sandbox;
      },
    });
    // rw on a directory every uid may write, and no mounts: no private workspace to seed and
    // no exec needed to prove /workspace writable, so the engine sees only the container work.
    spec = testSandboxSpec("manager", {
      spec: { workspaceAccess: "rw", agentWorkspace: tmpdir(), mounts: [] },
    });
  });
  afterEach(async () => {
    await manager.flush();
    await rm(home, { recursive: true, force: true });
  });

  it("creates the hardened container once, reuses it, and counts who holds it", async () => {
    const first = await manager.acquire(spec);
    expect(first.fresh).toBe(true);
    const container = fake.containers.find(spec.containerName)!;
    expect(container.labels[labelKeys.home]).toBe(home);
    expect(container.request?.HostConfig).toMatchObject({
      CapDrop: ["ALL"],
      ReadonlyRootfs: true,
      Privileged: false,
    });
    const second = await manager.acquire(spec);
    expect(second.fresh).toBe(false);
    expect(made.map((m) => m.containerId)).toEqual([container.id, container.id]);
    expect(manager.holderCount(spec.containerName)).toBe(2);
    await first.release();
    await first.release();
    expect(manager.holderCount(spec.containerName)).toBe(1);
    await second.release();
    expect(manager.holderCount(spec.containerName)).toBe(0);
  });

  it("keeps a drifted container it holds (stale) and recreates it once released", async () => {
    const lease = await manager.acquire(spec);
    const drifted = await manager.acquire({ ...spec, configHash: "v2" });
    expect(drifted.stale).toBe(true);
    expect(drifted.warnings.join("\n")).toMatch(/busy, so it was kept/);
    await lease.release();
    await drifted.release();
    const fresh = await manager.acquire({ ...spec, configHash: "v2" });
    expect(fresh.fresh).toBe(true);
    expect(fake.containers.find(spec.containerName)?.labels[labelKeys.configHash]).toBe("v2");
    await fresh.release();
  });

  it("freezes the container while fn runs and thaws it after, whatever fn did", async () => {
    const lease = await manager.acquire(spec);
    const container = fake.containers.find(spec.containerName)!;
    const seen = await lease.freeze(() => Promise.resolve(container.state.status));
    expect(seen).toBe("paused");
    expect(container.state.status).toBe("running");
    await expect(lease.freeze(() => Promise.reject(new Error("diff failed")))).rejects.toThrow(
      "diff failed",
    );
    expect(container.state.status).toBe("running");
    await lease.release();
  });

  it("refuses what it read while frozen when someone resumed the container meanwhile", async () => {
    const lease = await manager.acquire(spec);
    const error = await lease
      .freeze(() => fake.containers.unpause(spec.containerName).then(() => "torn"))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxError);
    expect((error as Error).message).toMatch(/was resumed while cordon read its workspace/);
    await lease.release();
  });

  it("a second freeze waits its turn behind another command's, and each sees the container paused", async () => {
    const lease = await manager.acquire(spec);
    const container = fake.containers.find(spec.containerName)!;
    const order: string[] = [];
    let resume!: () => void;
    const gate = new Promise<void>((resolve) => (resume = resolve));
    const first = lease.freeze(async () => {
      order.push(`first ${container.state.status}`);
      await gate;
    });
    while (order.length === 0) await sleep(5);
    const second = lease.freeze(() =>
      Promise.resolve(order.push(`second ${container.state.status}`)),
    );
    // Nothing the second freeze could do before the first resumes the container.
    await sleep(50);
    expect(order).toEqual(["first paused"]);
    resume();
    await Promise.all([first, second]);
    expect(order).toEqual(["first paused", "second paused"]);
    expect(container.state.status).toBe("running");
    await lease.release();
  });

  it("a freeze that waits behind another command's says so through the acquire's progress", async () => {
    const progress: AcquireProgress[] = [];
    const lease = await manager.acquire(spec, { onProgress: (event) => progress.push(event) });
    // Another cordon command (this process: a live holder) has the sandbox frozen.
    const other = await holdFreezeUntilReleased(home, spec.containerName);
    let ran = false;
    const waiting = lease.freeze(() => Promise.resolve((ran = true)));
    while (!progress.some((event) => event.phase === "wait")) await sleep(20);
    expect(ran).toBe(false);
    expect(progress.filter((event) => event.phase === "wait")).toEqual([
      {
        phase: "wait",
        message: expect.stringMatching(
          new RegExp(
            `^waiting for .*\\(pid ${process.pid} on .*\\), which has ${spec.containerName} frozen`,
          ),
        ) as string,
      },
    ]);
    await Promise.all([other.release(), waiting]);
    expect(ran).toBe(true);
    await lease.release();
    // The wait is said after 1 s: room for a loaded machine.
  }, 30_000);

  it("takes over a pause no live cordon command holds (a `docker pause`), and resumes it after", async () => {
    const lease = await manager.acquire(spec);
    await fake.containers.pause(spec.containerName);
    const container = fake.containers.find(spec.containerName)!;
    expect(await lease.freeze(() => Promise.resolve(container.state.status))).toBe("paused");
    expect(container.state.status).toBe("running");
    await lease.release();
  });

  it("replaces a container that died mid-session on recover, same name, new id", async () => {
    const lease = await manager.acquire(spec);
    const managed = made[0]!;
    expect(await managed.recover()).toBe(managed.containerId);
    await fake.containers.kill(spec.containerName);
    const replacement = await managed.recover();
    expect(replacement).not.toBe(managed.containerId);
    expect(fake.containers.find(spec.containerName)?.id).toBe(replacement);
    expect(fake.containers.find(managed.containerId)).toBeUndefined();
    await lease.release();
  });

  it("says what an automatic prune did as a debug line, never an info line on a CLI's stderr", async () => {
    /** The manager's log at `level`, as the CLI's logger writes it: one JSON object a line. */
    const logAt = (level: "info" | "debug") => {
      const lines: string[] = [];
      const logger = createLogger({ level, destination: { write: (line) => lines.push(line) } });
      return { lines, logger };
    };
    const stopsIdle = (logger: ReturnType<typeof createLogger>) =>
      new DockerSandboxManager({
        engine: fake.engine,
        stateDirectory: home,
        image,
        logger,
        createSandbox: (container) => ({ id: container.containerName }) as Sandbox,
        prune: { stopIdleMs: 1, everyMs: 0 },
      });
    const other = testSandboxSpec("other", {
      spec: { workspaceAccess: "rw", agentWorkspace: tmpdir(), mounts: [] },
    });
    for (const level of ["info", "debug"] as const) {
      const log = logAt(level);
      const logged = stopsIdle(log.logger);
      // Idle for longer than the limit once released; the next acquire's sweep stops it.
      await (await logged.acquire(spec)).release();
      await sleep(20);
      await (await logged.acquire(other)).release();
      await logged.flush();
      expect(fake.containers.find(spec.containerName)?.state.status).toBe("exited");
      const said = log.lines.filter(
        (line) => line.includes("stopped idle sandboxes") && line.includes(spec.containerName),
      );
      expect(said, level).toHaveLength(level === "debug" ? 1 : 0);
      await fake.containers.start(spec.containerName);
    }
  });

  it("counts checkpoints only with the image already on the engine: a missing one is an ImageError, never a build or a pull", async () => {
    const asked: string[] = [];
    fake.engine.images.build = () => {
      asked.push("build");
      return Promise.reject(new Error("the fake engine builds no images"));
    };
    fake.engine.images.pull = (reference) => {
      asked.push(`pull ${reference}`);
      return Promise.reject(new Error("the fake engine pulls no images"));
    };
    // The built-in image as its recipe names it: the base is on the engine, the image is not.
    fake.images.set(localBaseImage, { id: "sha256:base", labels: {}, env: [] });
    const lister = new DockerSandboxManager({
      engine: fake.engine,
      stateDirectory: home,
      createSandbox: (container) => ({ id: container.containerName }) as Sandbox,
    });
    const listed = testSandboxSpec("listed");
    expect(listed.docker.image.source).toBe("builtin");
    const error = await lister
      .compareCheckpoints(listed, [[undefined, "a".repeat(40)]])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ImageError);
    expect((error as ImageError).message).toMatch(
      /^the sandbox image cordon-sandbox:[0-9a-f]{12} is not on the Docker engine$/,
    );
    expect((error as ImageError).fix).toBe("run `cordon image build`");
    expect(asked).toEqual([]);
    expect(await fake.containers.list({ labels: [] })).toEqual([]);
  });
});
