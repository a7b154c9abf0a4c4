/**
 * `cordon sandbox prune` and the support volumes (the executor binary, hosts files), against the
 * real engine, attacked the two ways that broke a first attempt: a stopped sandbox whose hosts file
 * is a bind (Docker does not count it as a use) must start again as it was, and an acquire racing
 * the removal must get a filled volume, never the empty one Docker makes silently by that name (an
 * inspector that mounts the executor's volume as much as a sandbox).
 *
 * Support volumes are the engine's, shared with every test running beside this one: the sweeps
 * here keep to this file's own volumes (`select`), except the inventory's dry run, which removes
 * nothing.
 */
import { mkdir, mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { WorkspaceInspectors } from "../../src/sandbox/docker/inspector/index.js";
import {
  executorFileName,
  residentExecutorBinary,
} from "../../src/sandbox/docker/resident/executor-binary.js";
import { SupportVolumes } from "../../src/sandbox/docker/support-volumes.js";
import {
  DockerEngine,
  DockerSandbox,
  DockerSandboxManager,
  SandboxInventory,
  privateWorkspacePath,
  pruneSupportVolumes,
  type DockerSandboxLease,
  type PruneReport,
  type SandboxSpec,
} from "../../src/sandbox/index.js";
import type { ListedJson } from "../../src/cli/commands/sandbox-list.js";
import {
  dockerClient,
  removeContainersOfHome,
  requireSandboxImage,
  testLabel,
} from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { testSandboxSpec } from "../support/sandbox-spec.js";
import { removeStateDirectory } from "../support/state-directory.js";

describe("prune and support volumes", () => {
  const engine = new DockerEngine();
  const docker = dockerClient();
  const suffix = `${process.pid}-${Date.now().toString(36)}`;
  let home: string;
  let image: string;
  /**
   * The support volumes this file made (hosts files only it names, files only it writes): the only
   * ones its sweeps may remove. The executor's volume is every sandbox's on this engine: a sweep
   * here considers it only while this file's stopped sandbox mounts it.
   */
  const mine = new Set<string>();

  const newManager = (): DockerSandboxManager =>
    new DockerSandboxManager({
      engine,
      stateDirectory: home,
      image,
      extraLabels: testLabel,
      createSandbox: (container) => DockerSandbox.attach(engine, container),
    });

  /** A sandbox with no network whose hosts file is this test's own (a host only it names). */
  function spec(name: string, host: string): SandboxSpec {
    const containerName = `cordon-test-${name}-${suffix}`;
    const privateWorkspace = privateWorkspacePath(home, containerName);
    return testSandboxSpec(name, {
      docker: { extraHosts: [`${host}:127.0.0.9`] },
      spec: {
        containerName,
        privateWorkspace,
        mounts: [
          { source: privateWorkspace, target: "/workspace", readOnly: false, role: "workspace" },
        ],
      },
    });
  }

  /** The support volumes a container mounts (its hosts file's and its executor's). */
  async function supportVolumesOf(container: string): Promise<string[]> {
    const info = await docker.getContainer(container).inspect();
    return info.Mounts.flatMap((mount) =>
      mount.Name && /^cordon-(hosts|executor)-/.test(mount.Name) ? [mount.Name] : [],
    );
  }

  const idOf = async (container: string): Promise<string> =>
    (await docker.getContainer(container).inspect()).Id;

  const volumeLabels = async (name: string): Promise<Record<string, string> | undefined> =>
    docker
      .getVolume(name)
      .inspect()
      .then(
        (info) => (info.Labels ?? {}) as Record<string, string>,
        () => undefined,
      );

  const sweepMine = (also: readonly string[] = []) =>
    pruneSupportVolumes({
      containers: engine.containers,
      volumes: engine.volumes,
      madeBefore: Infinity,
      dryRun: false,
      select: (name) => mine.has(name) || also.includes(name),
    });

  beforeAll(async () => {
    image = await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-support-prune-"));
  });

  afterAll(async () => {
    await removeContainersOfHome(home);
    await sweepMine().catch(() => undefined);
    await removeStateDirectory(home);
  });

  it("keeps a stopped sandbox's volumes (it starts again in place), removes one no container mounts", async () => {
    const manager = newManager();
    const host = `stopped-${suffix}`;
    const first = await manager.acquire(spec("stopped", host));
    const containerName = first.containerName;
    const containerId = await idOf(containerName);
    await first.release();
    const used = await supportVolumesOf(containerId);
    expect(used).toHaveLength(2);
    const [hostsVolume] = used.filter((name) => name.startsWith("cordon-hosts-"));
    const [executorVolume] = used.filter((name) => name.startsWith("cordon-executor-"));
    mine.add(hostsVolume!);
    const unused = await new SupportVolumes(engine).ensure(
      "hosts",
      [{ name: "hosts", content: Buffer.from(`127.0.0.9\tunused-${suffix}\n`), mode: 0o644 }],
      image,
    );
    mine.add(unused.name);
    await docker.getContainer(containerId).stop({ t: 1 });

    // The inventory's prune reports it (a dry run: the real one would sweep other tests' too).
    const inventory = new SandboxInventory({ engine, stateDirectory: home, image });
    const dry = await inventory.prune({
      dryRun: true,
      orphanMinAgeMs: 0,
      supportVolumeMinAgeMs: 0,
      stopped: false,
    });
    const reported = dry.orphans.map((orphan) => orphan.path);
    expect(reported).toContain(unused.name);
    for (const name of used) expect(reported).not.toContain(name);
    expect(dry.orphans.find((o) => o.path === unused.name)?.reason).toMatch(
      /hosts file.*no container mounts/,
    );
    expect((await inventory.unusedSupportVolumes()).map((v) => v.name)).toContain(unused.name);
    // As the CLI says it: `sandbox list --json` and its stderr line, `prune --dry-run --json`.
    const listed = await runCordon(["sandbox", "list", "--json"], { CORDON_HOME: home });
    const names = (JSON.parse(listed.stdout) as ListedJson).unusedSupportVolumes.map((v) => v.name);
    expect(names).toContain(unused.name);
    expect(names).not.toContain(hostsVolume);
    const text = await runCordon(["sandbox", "list"], { CORDON_HOME: home });
    expect(text.stderr).toMatch(
      /support volume\(s\) on the engine no container mounts .*cordon sandbox prune/,
    );
    // The CLI's prune keeps its grace: made moments ago, it may be an acquire's, still filling.
    const pruned = await runCordon(["sandbox", "prune", "--dry-run", "--json"], {
      CORDON_HOME: home,
    });
    expect((JSON.parse(pruned.stdout) as PruneReport).orphans.map((o) => o.path)).not.toContain(
      unused.name,
    );
    expect(await volumeLabels(unused.name)).toBeDefined();

    const removed = await sweepMine([executorVolume!]);
    expect(removed.map((volume) => volume.name)).toEqual([unused.name]);
    expect(await volumeLabels(unused.name)).toBeUndefined();
    // The user's own `docker volume rm` is refused too: the sandbox mounts its hosts volume.
    await expect(docker.getVolume(hostsVolume!).remove()).rejects.toThrow(/in use/);

    const again = await manager.acquire(spec("stopped", host));
    try {
      // Started in place, not replaced: a missing bind source would have failed its start.
      expect(await idOf(again.containerName)).toBe(containerId);
      const resolved = await again.sandbox.exec(`getent hosts ${host}`);
      expect(resolved.stdout).toContain("127.0.0.9");
    } finally {
      await again.release();
    }
  }, 180_000);

  it("an acquire after its hosts volume was removed, or racing removals, gets a filled one", async () => {
    const manager = newManager();
    const host = `raced-${suffix}`;
    const leases: DockerSandboxLease[] = [];
    try {
      // This process now holds the hosts volume in its cache; its container goes, then the volume.
      const first = await manager.acquire(spec("raced-0", host));
      leases.push(first);
      const [stale] = (await supportVolumesOf(first.containerName)).filter((n) =>
        n.includes("hosts"),
      );
      mine.add(stale!);
      await first.release();
      await docker.getContainer(first.containerName).remove({ force: true });
      expect((await sweepMine()).map((volume) => volume.name)).toEqual([stale]);

      // Then acquires race a sweep that runs as long as they do.
      let racing = true;
      const sweeping = (async () => {
        let sweeps = 0;
        while (racing || sweeps === 0) {
          sweeps += 1;
          await sweepMine();
        }
        return sweeps;
      })();
      try {
        for (let i = 1; i <= 4; i += 1) {
          const lease = await manager.acquire(spec(`raced-${i}`, host));
          leases.push(lease);
          const used = await supportVolumesOf(lease.containerName);
          for (const name of used) {
            if (name.startsWith("cordon-hosts-")) mine.add(name);
            // Never the empty, unlabelled volume Docker makes by a removed one's name.
            expect((await volumeLabels(name))?.["cordon.support"]).toMatch(/-data$/);
          }
          const resolved = await lease.sandbox.exec(`getent hosts ${host}`);
          expect(resolved.stdout).toContain("127.0.0.9");
          await lease.release();
        }
      } finally {
        racing = false;
      }
      expect(await sweeping).toBeGreaterThan(0);
      expect(await volumeLabels(stale!)).toBeUndefined();
    } finally {
      for (const lease of leases) await lease.release().catch(() => undefined);
    }
  }, 240_000);

  it("a container made with a removed volume's name gets a filled volume, not Docker's empty one", async () => {
    const support = new SupportVolumes(engine);
    const files = [{ name: "marker", content: Buffer.from(`filled ${suffix}\n`), mode: 0o644 }];
    const first = await support.ensure("executor", files, image);
    mine.add(first.name);
    expect((await sweepMine()).map((volume) => volume.name)).toEqual([first.name]);
    // The object still hands out the removed name: as a process does that found it a moment ago.
    const name = `cordon-support-raced-${suffix}`;
    const id = await support.createContainer(async () => {
      const data = await support.ensure("executor", files, image);
      mine.add(data.name);
      return {
        name,
        Image: image,
        Entrypoint: ["cat", "/support/marker"],
        Labels: { ...testLabel },
        HostConfig: {
          NetworkMode: "none",
          Mounts: [{ Type: "volume", Source: data.name, Target: "/support", ReadOnly: true }],
        },
      };
    });
    try {
      const container = docker.getContainer(id!);
      const [mounted] = (await container.inspect()).Mounts.map((mount) => mount.Name);
      expect(mounted).not.toBe(first.name);
      expect((await volumeLabels(mounted!))?.["cordon.support"]).toBe("executor-data");
      // The impostor Docker made by the removed name is gone again.
      expect(await volumeLabels(first.name)).toBeUndefined();
      await container.start();
      await container.wait();
      const log = await container.logs({ stdout: true });
      expect(log.toString("utf8")).toContain(`filled ${suffix}`);
    } finally {
      await docker
        .getContainer(name)
        .remove({ force: true })
        .catch(() => undefined);
    }
  }, 120_000);

  it("an inspector made with a removed executor volume's name mounts a filled one, not Docker's empty one", async () => {
    const binary = residentExecutorBinary();
    expect(binary, "the executor is built by `npm run build`").toBeDefined();
    // This file's own executor volume: the built binary with bytes after its end, which nothing
    // reads, so the sweep below never takes the volume other tests' sandboxes mount.
    const files = [
      {
        name: executorFileName,
        content: Buffer.concat([await readFile(binary!), Buffer.from(`\0${suffix}`)]),
        mode: 0o755,
      },
    ];
    const support = new SupportVolumes(engine);
    const first = await support.ensure("executor", files, image);
    mine.add(first.name);
    // (With what the tests above left unmounted.)
    expect((await sweepMine()).map((volume) => volume.name)).toContain(first.name);
    // As the manager's: this object still hands out the removed name, as one that found it a
    // moment ago, before a concurrent `cordon sandbox prune` removed it.
    const inspectors = new WorkspaceInspectors({
      containers: engine.containers,
      create: (request) => support.createContainer(request),
    });
    const sandboxName = `cordon-test-inspected-${suffix}`;
    const copy = path.join(home, "inspected");
    await mkdir(path.join(copy, "baseline"), { recursive: true });
    const inspector = await inspectors.start(
      {
        sandboxName,
        workspace: copy,
        baselineGitDir: path.join(copy, "baseline"),
        image,
        user: "1000:1000",
        stateDirectory: home,
      },
      {
        executorVolume: async () => {
          const data = await support.ensure("executor", files, image);
          mine.add(data.name);
          return data.name;
        },
      },
    );
    try {
      const [started] = await docker.listContainers({
        filters: { label: [`cordon.inspector=${sandboxName}`] },
      });
      const mounts = (await docker.getContainer(started!.Id).inspect()).Mounts;
      const executor = mounts.find((mount) => mount.Destination === "/.cordon");
      expect(executor?.Name).not.toBe(first.name);
      // Never the empty, unlabelled volume Docker makes by a removed one's name.
      expect((await volumeLabels(executor!.Name!))?.["cordon.support"]).toBe("executor-data");
      expect(await volumeLabels(first.name)).toBeUndefined();
    } finally {
      await inspector.remove();
    }
  }, 120_000);
});
