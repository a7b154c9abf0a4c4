import { mkdir, mkdtemp, readFile, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { labelKeys } from "../../src/sandbox/docker/container-options.js";
import {
  DockerEngine,
  DockerSandboxManager,
  privateWorkspacePath,
  type PruneReport,
  type DockerSandboxLease,
  type SandboxSpec,
  type SandboxSummary,
} from "../../src/sandbox/index.js";
import {
  dockerClient,
  removeContainer,
  requireSandboxImage,
  testLabel,
} from "../support/docker.js";
import { createRecordingSandbox, recorded } from "../support/recording-sandbox.js";
import { runCordon } from "../support/run-cli.js";
import { testSandboxSpec } from "../support/sandbox-spec.js";
import { removeStateDirectory } from "../support/state-directory.js";

/**
 * `cordon sandbox list | rm | prune` through the CLI, on sandboxes a real manager created in a
 * private CORDON_HOME. The steps build on each other, in order.
 */
describe("cordon sandbox list, rm and prune", () => {
  const docker = dockerClient();
  const engine = new DockerEngine();
  let image: string;
  let root: string;
  let home: string;
  let otherHome: string;
  let manager: DockerSandboxManager;
  const leases: DockerSandboxLease[] = [];
  const specs: Record<string, SandboxSpec> = {};
  const foreign: string[] = [];

  function spec(name: string, stateDirectory = home): SandboxSpec {
    const base = testSandboxSpec(`cli-${name}`, {
      spec: { agentWorkspace: root, configHash: "v1" },
    });
    const privateWorkspace = privateWorkspacePath(stateDirectory, base.containerName);
    return {
      ...base,
      privateWorkspace,
      mounts: [
        { source: privateWorkspace, target: "/workspace", readOnly: false, role: "workspace" },
      ],
    };
  }

  function managerFor(stateDirectory: string): DockerSandboxManager {
    return new DockerSandboxManager({
      engine,
      stateDirectory,
      image,
      extraLabels: testLabel,
      createSandbox: createRecordingSandbox,
    });
  }

  const cordon = (...args: string[]) => runCordon(args, { CORDON_HOME: home });

  async function listed(): Promise<SandboxSummary[]> {
    const result = await cordon("sandbox", "list", "--json");
    expect(result.exitCode).toBe(0);
    return (JSON.parse(result.stdout) as { sandboxes: SandboxSummary[] }).sandboxes;
  }

  async function exists(name: string): Promise<boolean> {
    return docker
      .getContainer(name)
      .inspect()
      .then(
        () => true,
        () => false,
      );
  }

  const present = (file: string) =>
    stat(file).then(
      () => true,
      () => false,
    );

  const recordFile = (name: string) => path.join(home, "sandboxes", `${name}.json`);

  /** Moves a sandbox's last use into the past, as if nobody had touched it since. */
  async function ageRecord(name: string, hours: number): Promise<void> {
    const file = recordFile(name);
    const record = JSON.parse(await readFile(file, "utf8")) as Record<string, unknown>;
    record["lastUsedAt"] = new Date(Date.now() - hours * 3_600_000).toISOString();
    await writeFile(file, JSON.stringify(record));
  }

  beforeAll(async () => {
    image = await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-sandbox-cli-"));
    home = path.join(root, "home");
    otherHome = path.join(root, "other-home");
    manager = managerFor(home);
    for (const name of ["kept", "idle", "busy", "orphaned", "dead"]) {
      specs[name] = spec(name);
      const lease = await manager.acquire(specs[name]);
      leases.push(lease);
      await lease.release();
    }
    specs["elsewhere"] = spec("elsewhere", otherHome);
    leases.push(await managerFor(otherHome).acquire(specs["elsewhere"]));
  });

  afterAll(async () => {
    for (const lease of leases) await lease.release();
    for (const stateDirectory of [home, otherHome]) {
      const mine = await docker.listContainers({
        all: true,
        filters: { label: [`${labelKeys.home}=${path.resolve(stateDirectory)}`] },
      });
      for (const info of mine) await removeContainer(docker.getContainer(info.Id));
    }
    for (const name of foreign) await removeContainer(docker.getContainer(name));
    await removeStateDirectory(root);
  });

  const nameOf = (key: string): string => specs[key]?.containerName ?? "";

  it("lists this home's sandboxes with scope, state, freshness and times", async () => {
    // A newer config asked for while the sandbox is held: kept, and listed as stale.
    const held = await manager.acquire(specs["kept"] ?? spec("x"));
    leases.push(held);
    const newer = await manager.acquire({ ...(specs["kept"] ?? spec("x")), configHash: "v2" });
    leases.push(newer);
    expect(newer.stale).toBe(true);

    const sandboxes = await listed();
    expect(sandboxes.map((s) => s.name).sort()).toEqual(
      ["kept", "idle", "busy", "orphaned", "dead"].map(nameOf).sort(),
    );
    const kept = sandboxes.find((s) => s.name === nameOf("kept"));
    expect(kept).toMatchObject({
      scope: "session",
      scopeKey: "session:test:cli-kept",
      agent: "test",
      session: "agent:test:cli-kept",
      state: "running",
      image,
      imageStatus: "current",
      configHash: "v1",
      configStatus: "stale",
      workspaceAccess: "none",
      privateWorkspace: specs["kept"]?.privateWorkspace,
    });
    expect(sandboxes.find((s) => s.name === nameOf("idle"))?.configStatus).toBe("current");
    expect(Date.parse(kept?.lastUsedAt ?? "")).toBeGreaterThanOrEqual(
      Date.parse(kept?.createdAt ?? ""),
    );

    const text = await cordon("sandbox", "list");
    expect(text.stdout.split("\n")[0]).toMatch(/^NAME\s+STATE\s+SCOPE\s+KEY\s+AGENT/);
    expect(text.stdout).toContain(nameOf("idle"));
    expect(text.stdout).not.toContain(nameOf("elsewhere"));
  });

  it("prunes idle sandboxes, after a dry run that removes nothing", async () => {
    await ageRecord(nameOf("idle"), 3);
    await ageRecord(nameOf("busy"), 3);
    // "busy" is idle by its record, but a command runs in it (another process's agent).
    const busyLease = leases.find((l) => l.containerName === nameOf("busy"));
    const running = recorded(busyLease?.sandbox ?? leases[0]!.sandbox).run("sleep 60");
    await expect
      .poll(
        async () => {
          const top = (await docker.getContainer(nameOf("busy")).top()) as { Processes: unknown[] };
          return top.Processes.length;
        },
        { timeout: 30_000 },
      )
      .toBeGreaterThan(2);

    const dry = await cordon("sandbox", "prune", "--idle", "2h", "--dry-run", "--json");
    expect(dry.exitCode).toBe(0);
    const planned = JSON.parse(dry.stdout) as PruneReport;
    expect(planned.dryRun).toBe(true);
    expect(planned.removed.map((r) => [r.name, r.reason])).toEqual([[nameOf("idle"), "idle"]]);
    expect(planned.skipped.map((s) => s.name)).toEqual([nameOf("busy")]);
    expect(await exists(nameOf("idle"))).toBe(true);

    const pruned = await cordon("sandbox", "prune", "--idle", "2h");
    expect(pruned.exitCode).toBe(0);
    expect(pruned.stdout).toContain(`removed ${nameOf("idle")} (idle`);
    expect(pruned.stdout).toContain(`kept ${nameOf("busy")}`);
    expect(await exists(nameOf("idle"))).toBe(false);
    expect(await present(specs["idle"]?.privateWorkspace ?? "")).toBe(false);
    expect(await present(recordFile(nameOf("idle")))).toBe(false);
    expect(await exists(nameOf("busy"))).toBe(true);
    expect(await exists(nameOf("kept"))).toBe(true);

    await docker.getContainer(nameOf("busy")).kill();
    await running.catch(() => undefined);
  });

  it("prunes dead sandboxes and orphaned workspaces, but not fresh ones", async () => {
    await docker.getContainer(nameOf("dead")).kill();
    // A container removed behind cordon's back leaves its record and private workspace.
    await docker.getContainer(nameOf("orphaned")).remove({ force: true });
    await ageRecord(nameOf("orphaned"), 1);
    const workspaces = path.join(home, "workspaces");
    const stray = path.join(workspaces, "cordon-stray-old");
    const fresh = path.join(workspaces, "cordon-stray-new");
    await mkdir(stray);
    await mkdir(fresh);
    const old = new Date(Date.now() - 3_600_000);
    await utimes(stray, old, old);

    const dry = await cordon("sandbox", "prune", "--dry-run", "--json");
    const planned = JSON.parse(dry.stdout) as PruneReport;
    expect(planned.removed.map((r) => r.name).sort()).toEqual(
      [nameOf("busy"), nameOf("dead")].sort(),
    );
    expect(planned.orphans.map((o) => o.path).sort()).toEqual(
      [specs["orphaned"]?.privateWorkspace, recordFile(nameOf("orphaned")), stray].sort(),
    );
    expect(await present(stray)).toBe(true);

    const pruned = await cordon("sandbox", "prune");
    expect(pruned.exitCode).toBe(0);
    expect(await exists(nameOf("dead"))).toBe(false);
    expect(await present(specs["orphaned"]?.privateWorkspace ?? "")).toBe(false);
    expect(await present(recordFile(nameOf("orphaned")))).toBe(false);
    expect(await present(stray)).toBe(false);
    expect(await present(fresh)).toBe(true);
    expect(await present(specs["kept"]?.privateWorkspace ?? "")).toBe(true);
  });

  it("removes sandboxes by name, refusing names that are not cordon's", async () => {
    const notOurs = `cordon-test-not-ours-${process.pid}`;
    await docker.createContainer({ name: notOurs, Image: image, Labels: { ...testLabel } });
    foreign.push(notOurs);
    const refused = await cordon("sandbox", "rm", notOurs, "cordon-test-no-such-sandbox");
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toContain(`${notOurs} is not a cordon sandbox`);
    expect(refused.stderr).toContain("docker rm -f");
    expect(refused.stderr).toContain("there is no sandbox named cordon-test-no-such-sandbox");
    expect(await exists(notOurs)).toBe(true);

    // A unique prefix names it, as `docker rm` takes an id prefix.
    const prefix = nameOf("kept").slice(0, -3);
    const removed = await cordon("sandbox", "rm", prefix, "--keep-workspace");
    expect(removed.exitCode).toBe(0);
    expect(removed.stdout).toBe(
      `removed ${nameOf("kept")} (container, kept its workspace ${specs["kept"]?.privateWorkspace})\n`,
    );
    expect(await exists(nameOf("kept"))).toBe(false);
    expect(await present(specs["kept"]?.privateWorkspace ?? "")).toBe(true);
    expect(await present(recordFile(nameOf("kept")))).toBe(false);
  });

  it("deletes no private workspace outside the state directory", async () => {
    const base = spec("configured-root");
    const outside = path.join(root, "srv", base.containerName);
    const lease = await manager.acquire({
      ...base,
      privateWorkspace: outside,
      mounts: [{ source: outside, target: "/workspace", readOnly: false, role: "workspace" }],
    });
    leases.push(lease);
    const removed = await cordon("sandbox", "rm", base.containerName);
    expect(removed.stdout).toBe(
      `removed ${base.containerName} (container, kept its workspace ${outside})\n`,
    );
    expect(await present(outside)).toBe(true);
  });

  it("removes everything of this home with --all, and nothing of another", async () => {
    const again = await manager.acquire(spec("again"));
    leases.push(again);
    const all = await cordon("sandbox", "rm", "--all", "--json");
    expect(all.exitCode).toBe(0);
    expect((JSON.parse(all.stdout) as { name: string }[]).map((r) => r.name)).toEqual([
      again.containerName,
    ]);
    expect(await listed()).toEqual([]);
    expect(await exists(nameOf("elsewhere"))).toBe(true);
  });

  it("fails with exit code 3 and the fix when no engine answers, 2 on bad usage", async () => {
    const down = await runCordon(["sandbox", "list"], {
      CORDON_HOME: home,
      DOCKER_HOST: `unix://${path.join(root, "no-docker.sock")}`,
    });
    expect(down.exitCode).toBe(3);
    expect(down.stderr).toMatch(/cannot reach the Docker engine/);
    expect(down.stderr).toMatch(/fix: start the Docker engine/);

    const badDuration = await cordon("sandbox", "prune", "--idle", "soon");
    expect(badDuration.exitCode).toBe(2);
    expect(badDuration.stderr).toMatch(/--idle "soon" is not a duration/);
    expect((await cordon("sandbox", "rm")).exitCode).toBe(2);
  });
});
