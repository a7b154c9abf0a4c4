import { execFileSync } from "node:child_process";
import {
  chown,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  utimes,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { labelKeys } from "../../src/sandbox/docker/container-options.js";
import { poolMemberPrefix, poolShape } from "../../src/sandbox/docker/pool/pool-shape.js";
import { baselineGitDir } from "../../src/sandbox/workspace/index.js";
import {
  DockerEngine,
  DockerSandbox,
  DockerSandboxManager,
  SandboxInventory,
  diskBudgetSupport,
  diskImagePath,
  mountCountAt,
  privateWorkspacePath,
  type DockerSandboxLease,
  type SandboxSpec,
} from "../../src/sandbox/index.js";
import {
  dockerClient,
  removeContainer,
  requireSandboxImage,
  testLabel,
} from "../support/docker.js";
import { makeHostileRepository } from "../support/hostile-repository.js";
import { testSandboxSpec } from "../support/sandbox-spec.js";
import { removeStateDirectory } from "../support/state-directory.js";

/**
 * The warm pool against a real engine (docs/pool.md): members are made in the background after an
 * acquire, a new sandbox of the same shape takes one (its container renamed, its workspace moved,
 * the record saying whose it is), and nothing of one scope is ever handed to another.
 */
describe("warm pool", () => {
  const docker = dockerClient();
  const engine = new DockerEngine();
  let image: string;
  let root: string;
  let stateDirectory: string;
  let manager: DockerSandboxManager;
  const leases: DockerSandboxLease[] = [];

  function newManager(): DockerSandboxManager {
    return new DockerSandboxManager({
      engine,
      stateDirectory,
      image,
      extraLabels: testLabel,
      createSandbox: (container) => DockerSandbox.forContainer(engine, container),
    });
  }

  /** A `none` spec of one shape: only the session (and so the name and workspace) differ. */
  function spec(session: string, overrides: Partial<SandboxSpec> = {}): SandboxSpec {
    const base = testSandboxSpec(session, {
      spec: { configHash: "v1", agentWorkspace: path.join(root, "agent"), ...overrides },
    });
    const privateWorkspace = privateWorkspacePath(stateDirectory, base.containerName);
    return {
      ...base,
      privateWorkspace,
      mounts: [
        { source: privateWorkspace, target: "/workspace", readOnly: false, role: "workspace" },
      ],
      ...overrides,
    };
  }

  async function acquire(s: SandboxSpec, size = 1): Promise<DockerSandboxLease> {
    const lease = await manager.acquire(s, { pool: { size } });
    leases.push(lease);
    return lease;
  }

  async function containerIdOf(name: string): Promise<string> {
    return (await docker.getContainer(name).inspect()).Id;
  }

  /** The waiting members of this state directory (running, named as the pool names them). */
  async function members(): Promise<{ id: string; name: string }[]> {
    const found = await docker.listContainers({
      filters: { label: [`${labelKeys.home}=${stateDirectory}`, labelKeys.pool] },
    });
    return found
      .map((c) => ({ id: c.Id, name: (c.Names[0] ?? "").replace(/^\//, "") }))
      .filter((c) => c.name.includes("-pool-"));
  }

  /** The name prefix of the members seeded from `agentWorkspace`. */
  function poolMemberPrefixOf(agentWorkspace: string, seed = true): string {
    const s = spec("prefix", { seed, agentWorkspace });
    return poolMemberPrefix(s, poolShape(s));
  }

  beforeAll(async () => {
    image = await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-pool-"));
    stateDirectory = path.join(root, "home");
    await mkdir(path.join(root, "agent"));
    manager = newManager();
  });

  afterAll(async () => {
    for (const lease of leases) await lease.release();
    await manager.flush();
    const mine = await docker.listContainers({
      all: true,
      filters: { label: [`${labelKeys.home}=${path.resolve(stateDirectory)}`] },
    });
    for (const info of mine) await removeContainer(docker.getContainer(info.Id));
    await removeStateDirectory(root);
  });

  it("fills the pool after an acquire, and a new session takes a member: renamed, its workspace moved, its executor live", async () => {
    const first = await acquire(spec("first"));
    expect(first.fresh).toBe(true);
    await manager.flush();
    const waiting = await members();
    expect(waiting).toHaveLength(1);
    const [member] = waiting;
    const memberWorkspace = privateWorkspacePath(stateDirectory, member?.name ?? "");
    expect((await lstat(memberWorkspace)).isDirectory()).toBe(true);

    const s = spec("second");
    const second = await acquire(s);
    expect(second.fresh).toBe(true);
    // The member itself, under the sandbox's name, with the member's workspace at the sandbox's path.
    expect(await containerIdOf(s.containerName)).toBe(member?.id);
    await expect(lstat(memberWorkspace)).rejects.toThrow();
    const result = await second.sandbox.exec("echo from-the-sandbox > note.txt && id -u");
    expect(result.exitCode).toBe(0);
    expect(result.stdout.trim()).toBe("1000");
    const privateWorkspace = s.privateWorkspace ?? "";
    expect(await readFile(path.join(privateWorkspace, "note.txt"), "utf8")).toBe(
      "from-the-sandbox\n",
    );

    // Refilled in the background: one waits again, and it is not the taken one.
    await manager.flush();
    const refilled = await members();
    expect(refilled).toHaveLength(1);
    expect(refilled[0]?.id).not.toBe(member?.id);
  });

  it("reuses a taken member for its session, with no drift, and lists it as that session's", async () => {
    const s = spec("again");
    await manager.flush();
    const first = await acquire(s);
    const id = await containerIdOf(s.containerName);
    await first.release();
    const second = await acquire(s);
    expect(second.fresh).toBe(false);
    expect(second.stale).toBe(false);
    expect(await containerIdOf(s.containerName)).toBe(id);

    const inventory = new SandboxInventory({ engine, stateDirectory });
    const listed = (await inventory.list()).find((entry) => entry.name === s.containerName);
    expect(listed?.scopeKey).toBe(s.scopeKey);
    expect(listed?.privateWorkspace).toBe(s.privateWorkspace);
    expect(listed?.configStatus).toBe("current");
    // The take's refill runs in the background: once it has made its member, that one is listed
    // as waiting (on a loaded machine it may not have been created yet without this).
    await manager.flush();
    const waitingMembers = (await inventory.list()).filter((e) => e.scopeKey.startsWith("pool:"));
    expect(waitingMembers.length).toBeGreaterThan(0);
  });

  it("refuses a taken member to another scope that asks for its name", async () => {
    const s = spec("owned");
    await manager.flush();
    await acquire(s);
    const intruder = { ...spec("intruder"), containerName: s.containerName };
    await expect(manager.acquire(intruder)).rejects.toThrow(/made by cordon for something else/);
  });

  it("recreates a taken member whose config changed once it is idle, as any sandbox", async () => {
    const s = spec("drift");
    await manager.flush();
    const first = await acquire(s);
    const id = await containerIdOf(s.containerName);
    await first.release();
    const changed = await manager.acquire({ ...s, configHash: "v2" });
    leases.push(changed);
    expect(await containerIdOf(s.containerName)).not.toBe(id);
    const labels = (await docker.getContainer(s.containerName).inspect()).Config.Labels;
    expect(labels[labelKeys.configHash]).toBe("v2");
    expect(labels[labelKeys.pool]).toBeUndefined();
  });

  it("removes a taken member with the workspace it was handed, not the one it was made with", async () => {
    const s = spec("removed");
    await manager.flush();
    const lease = await acquire(s);
    await lease.release();
    const inventory = new SandboxInventory({ engine, stateDirectory });
    const removed = await inventory.remove(s.containerName);
    expect(removed.workspace).toBe(s.privateWorkspace);
    await expect(lstat(s.privateWorkspace ?? "")).rejects.toThrow();
  });

  it("never hands a scope's own existing workspace a member's: that scope is made as without a pool", async () => {
    const s = spec("has-work");
    await mkdir(s.privateWorkspace ?? "", { recursive: true });
    await writeFile(path.join(s.privateWorkspace ?? "", "work.txt"), "mine\n");
    await chown(s.privateWorkspace ?? "", 1000, 1000);
    await manager.flush();
    const before = await members();
    const lease = await acquire(s);
    expect((await members()).map((m) => m.id)).toEqual(before.map((m) => m.id));
    const seen = await lease.sandbox.exec("cat work.txt");
    expect(seen.stdout).toBe("mine\n");
  });

  it("two managers taking at once never share a member", async () => {
    await manager.flush();
    const other = newManager();
    const [a, b] = await Promise.all([
      manager.acquire(spec("race-a"), { pool: { size: 1 } }),
      other.acquire(spec("race-b"), { pool: { size: 1 } }),
    ]);
    leases.push(a, b);
    const ids = await Promise.all([a, b].map((lease) => containerIdOf(lease.containerName)));
    expect(new Set(ids).size).toBe(2);
    await other.flush();
  });

  /** A project of its own (a git repository with a commit and an untracked file) to seed from. */
  async function project(name: string): Promise<string> {
    const dir = path.join(root, name);
    await mkdir(path.join(dir, "src"), { recursive: true });
    await writeFile(path.join(dir, "src", "app.py"), "print('v1')\n");
    await writeFile(path.join(dir, ".gitignore"), "build/\n");
    const git = (...args: string[]) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd: dir });
    git("init", "-q");
    git("add", "-A");
    git("commit", "-qm", "v1");
    await writeFile(path.join(dir, "notes.txt"), "untracked\n");
    return dir;
  }

  it("prunes waiting members by the idle limit like any sandbox, with their workspaces", async () => {
    const agentWorkspace = path.join(root, "prune-project");
    await mkdir(agentWorkspace);
    await acquire(spec("prune-first", { agentWorkspace }));
    await manager.flush();
    const member = (await members()).find((m) =>
      m.name.includes(poolMemberPrefixOf(agentWorkspace, false)),
    );
    expect(member).toBeDefined();
    const name = member?.name ?? "";
    const recordFile = path.join(stateDirectory, "sandboxes", `${name}.json`);
    const record = JSON.parse(await readFile(recordFile, "utf8")) as Record<string, unknown>;
    record["lastUsedAt"] = new Date(Date.now() - 48 * 3_600_000).toISOString();
    await writeFile(recordFile, JSON.stringify(record));
    const inventory = new SandboxInventory({ engine, stateDirectory });
    const report = await inventory.prune({ idleMs: 24 * 3_600_000, stopped: false });
    expect(report.removed.map((r) => r.name)).toContain(name);
    expect((await members()).map((m) => m.name)).not.toContain(name);
    await expect(lstat(privateWorkspacePath(stateDirectory, name))).rejects.toThrow();
  });

  it("removes a member whose take a dead process left half done (its claim), at the next refill", async () => {
    const agentWorkspace = path.join(root, "claim-project");
    await mkdir(agentWorkspace);
    await acquire(spec("claim-first", { agentWorkspace }));
    await manager.flush();
    const member = (await members()).find((m) =>
      m.name.includes(poolMemberPrefixOf(agentWorkspace, false)),
    );
    const name = member?.name ?? "";
    expect(name).not.toBe("");
    // A claim a process made two minutes ago and never finished: the member is no one's now.
    const claim = path.join(stateDirectory, "pool-claims", name);
    await mkdir(path.dirname(claim), { recursive: true });
    await writeFile(claim, "999999\n");
    const past = new Date(Date.now() - 120_000);
    await utimes(claim, past, past);
    const s = spec("claim-second", { agentWorkspace });
    await acquire(s);
    // Not taken (claimed), so made without the pool; the refill then clears the abandoned member.
    expect(await containerIdOf(s.containerName)).not.toBe(member?.id);
    await manager.flush();
    expect((await members()).map((m) => m.name)).not.toContain(name);
    await expect(lstat(claim)).rejects.toThrow();
  });

  it("hands a seeded copy over while the workspace is unchanged since the member copied it", async () => {
    const agentWorkspace = await project("seeded-same");
    await acquire(spec("seeded-a", { seed: true, agentWorkspace }));
    await manager.flush();
    const [member] = await members();
    const s = spec("seeded-b", { seed: true, agentWorkspace });
    const lease = await acquire(s);
    expect(await containerIdOf(s.containerName)).toBe(member?.id);
    const seen = await lease.sandbox.exec("cat src/app.py notes.txt && git log --format=%s");
    expect(seen.stdout).toBe("print('v1')\nuntracked\nv1\n");
    // The baseline moved with it: what the agent changes is diffed against the seed.
    const privateWorkspace = s.privateWorkspace ?? "";
    expect((await lstat(baselineGitDir(privateWorkspace))).isDirectory()).toBe(true);
    await lease.sandbox.exec("echo edited >> src/app.py");
    expect([...((await lease.changes?.changedFiles()) ?? new Map()).keys()]).toEqual([
      "src/app.py",
    ]);
  });

  it("never hands over a copy older than the workspace: an edit, a new untracked file or a commit makes the member stale", async () => {
    const agentWorkspace = await project("seeded-changed");
    const changes = [
      () => writeFile(path.join(agentWorkspace, "src", "app.py"), "print('v2')\n"),
      () => writeFile(path.join(agentWorkspace, "src", "new.py"), "pass\n"),
      () =>
        execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "v2"], {
          cwd: agentWorkspace,
        }),
    ];
    await acquire(spec("changed-0", { seed: true, agentWorkspace }));
    for (const [index, change] of changes.entries()) {
      await manager.flush();
      const [member] = await members().then((all) =>
        all.filter((m) => m.name.includes(poolMemberPrefixOf(agentWorkspace))),
      );
      expect(member).toBeDefined();
      await change();
      const s = spec(`changed-${index + 1}`, { seed: true, agentWorkspace });
      const lease = await acquire(s);
      expect(await containerIdOf(s.containerName)).not.toBe(member?.id);
      // The stale member is gone; the sandbox is a fresh seed of the workspace as it is now.
      expect((await members()).map((m) => m.id)).not.toContain(member?.id);
      const seen = await lease.sandbox.exec("cat src/app.py; ls src; git log -1 --format=%s");
      const expected = await readFile(path.join(agentWorkspace, "src", "app.py"), "utf8");
      expect(seen.stdout.startsWith(expected)).toBe(true);
      if (index >= 1) expect(seen.stdout).toContain("new.py");
      if (index >= 2) expect(seen.stdout.trim().endsWith("v2")).toBe(true);
    }
  });

  it("runs nothing of a hostile repository on the host while it seeds a member or checks it at a take", async () => {
    const hostile = await makeHostileRepository(path.join(root, "hostile"));
    await acquire(spec("hostile-a", { seed: true, agentWorkspace: hostile.path }));
    await manager.flush();
    const [member] = await members().then((all) =>
      all.filter((m) => m.name.includes(poolMemberPrefixOf(hostile.path))),
    );
    expect(member).toBeDefined();
    const s = spec("hostile-b", { seed: true, agentWorkspace: hostile.path });
    const lease = await acquire(s);
    // Taken: the fingerprint was checked (git listed the files through the member's sanitized
    // .git), and none of the repository's hooks, filters or fsmonitor ran on the host.
    expect(await containerIdOf(s.containerName)).toBe(member?.id);
    expect(await readdir(hostile.markers)).toEqual([]);
    const seen = await lease.sandbox.exec("git config --list --local | grep -c fsmonitor || true");
    expect(seen.stdout.trim()).toBe("0");
  });

  it("hands over a workspace inside a disk image: bound at its new path, its image beside it", async (context) => {
    if (!(await diskBudgetSupport()).enforced) {
      context.skip();
      return;
    }
    const shape = { diskBytes: 64 * 1024 ** 2 };
    await acquire(spec("disk-first", shape));
    await manager.flush();
    const s = spec("disk-second", shape);
    const lease = await acquire(s);
    const privateWorkspace = s.privateWorkspace ?? "";
    expect(await mountCountAt(privateWorkspace)).toBeGreaterThan(0);
    expect((await lstat(diskImagePath(privateWorkspace))).isFile()).toBe(true);
    const wrote = await lease.sandbox.exec("echo bounded > inside.txt && df -P . | tail -1");
    expect(wrote.exitCode).toBe(0);
    expect(await readFile(path.join(privateWorkspace, "inside.txt"), "utf8")).toBe("bounded\n");
    // The budget holds in the taken member: the filesystem is the 64 MiB image.
    const blocks = Number(wrote.stdout.trim().split(/\s+/)[1]);
    expect(blocks).toBeLessThan(70 * 1024);
  });
});
