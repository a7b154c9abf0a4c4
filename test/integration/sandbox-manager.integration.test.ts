import { execFileSync } from "node:child_process";
import {
  chown,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readlink,
  stat,
  symlink,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  AbortedError,
  DockerUnavailableError,
  ExitCode,
  ImageError,
  SandboxStartError,
} from "../../src/common/index.js";
import { createContainerOptions, labelKeys } from "../../src/sandbox/docker/container-options.js";
import {
  DockerEngine,
  DockerSandboxManager,
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
import { createRecordingSandbox, recorded } from "../support/recording-sandbox.js";
import { testSandboxSpec } from "../support/sandbox-spec.js";
import { removeStateDirectory } from "../support/state-directory.js";

/**
 * The sandbox manager against a real engine: reuse, sharing under concurrency, refusing foreign
 * containers, drift, death, failed creates and a missing engine. Containers carry `testLabel`
 * and this file's state directory, and are removed in afterAll.
 */
describe("DockerSandboxManager", () => {
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
      createSandbox: createRecordingSandbox,
    });
  }

  /** A `none` spec with its private workspace mounted at /workspace, as the policy plans it. */
  function spec(name: string, overrides: Partial<SandboxSpec> = {}): SandboxSpec {
    const base = testSandboxSpec(name, {
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

  async function acquire(s: SandboxSpec, using = manager): Promise<DockerSandboxLease> {
    const lease = await using.acquire(s);
    leases.push(lease);
    return lease;
  }

  const idOf = (lease: DockerSandboxLease): string => recorded(lease.sandbox).container.containerId;

  async function readRecord(name: string): Promise<{ containerId: string; lastUsedAt: string }> {
    const file = path.join(stateDirectory, "sandboxes", `${name}.json`);
    return JSON.parse(await readFile(file, "utf8")) as { containerId: string; lastUsedAt: string };
  }

  /** Moves a sandbox's last use into the past, as if nobody had touched it since. */
  async function ageRecord(name: string, hours: number): Promise<void> {
    const file = path.join(stateDirectory, "sandboxes", `${name}.json`);
    const record = JSON.parse(await readFile(file, "utf8")) as Record<string, unknown>;
    record["lastUsedAt"] = new Date(Date.now() - hours * 3_600_000).toISOString();
    await writeFile(file, JSON.stringify(record));
  }

  async function containerState(name: string): Promise<string | undefined> {
    try {
      return (await docker.getContainer(name).inspect()).State.Status;
    } catch {
      return undefined;
    }
  }

  beforeAll(async () => {
    image = await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-manager-"));
    stateDirectory = path.join(root, "home");
    await mkdir(path.join(root, "agent"));
    manager = newManager();
  });

  afterAll(async () => {
    for (const lease of leases) await lease.release();
    const mine = await docker.listContainers({
      all: true,
      filters: { label: [`${labelKeys.home}=${path.resolve(stateDirectory)}`] },
    });
    for (const info of mine) await removeContainer(docker.getContainer(info.Id));
    for (const name of foreign) await removeContainer(docker.getContainer(name));
    // Cleanup, not a check: on an engine with many dangling images from earlier runs, a forced
    // removal has been seen to get no answer from Docker 20.10 (the image was gone all the same).
    for (const reference of testImages) {
      const removal = docker
        .getImage(reference)
        .remove({ force: true })
        .catch(() => undefined);
      await Promise.race([removal, new Promise((resolve) => setTimeout(resolve, 20_000).unref())]);
    }
    await removeStateDirectory(root);
  });
  const foreign: string[] = [];
  const testImages: string[] = [];

  it("reuses the container of a scope key and records when it was used", async () => {
    const s = spec("reuse");
    const first = await acquire(s);
    await first.release();
    const second = await acquire(s);
    expect(first.fresh).toBe(true);
    expect(second.fresh).toBe(false);
    expect(idOf(second)).toBe(idOf(first));
    const record = await readRecord(s.containerName);
    expect(record.containerId).toBe(idOf(first));
    // The container runs hardened, as the non-root user, in its private workspace.
    const who = await recorded(second.sandbox).run("id -u; pwd; touch /workspace/x && echo ok");
    expect(who.stdout).toBe("1000\n/workspace\nok\n");
    expect((await stat(path.join(s.privateWorkspace ?? "", "x"))).uid).toBe(1000);
  });

  it("makes one container for concurrent acquires, in one process and across managers", async () => {
    const s = spec("concurrent");
    // A second manager stands for a second process: it has its own lock, so the two race in
    // Docker and the loser sees a name conflict.
    const other = newManager();
    const results = await Promise.all([
      acquire(s),
      acquire(s),
      acquire(s, other),
      acquire(s, other),
    ]);
    expect(new Set(results.map(idOf)).size).toBe(1);
    expect(results.filter((r) => r.fresh)).toHaveLength(1);
    const named = await docker.listContainers({
      all: true,
      filters: { name: [s.containerName] },
    });
    expect(named).toHaveLength(1);
  });

  it("never adopts a container with the expected name that cordon did not create", async () => {
    const s = spec("foreign");
    await docker.createContainer({
      name: s.containerName,
      Image: image,
      Entrypoint: ["sleep"],
      Cmd: ["infinity"],
      Labels: { ...testLabel },
    });
    foreign.push(s.containerName);
    const error = await manager.acquire(s).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxStartError);
    expect((error as SandboxStartError).message).toMatch(/cordon did not create it/);
    expect((error as SandboxStartError).fix).toContain(`docker rm -f ${s.containerName}`);
    // It is left exactly as it was.
    expect(await containerState(s.containerName)).toBe("created");
  });

  it("never adopts a cordon container made for another scope key", async () => {
    const s = spec("mismatch");
    const impostor = await docker.createContainer(
      createContainerOptions({
        spec: { ...s, scopeKey: "session:someone-else", mounts: [] },
        image,
        createdAt: new Date().toISOString(),
        extraLabels: testLabel,
        stateDirectory: path.resolve(stateDirectory),
      }),
    );
    foreign.push(s.containerName);
    await impostor.start();
    const error = await manager.acquire(s).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxStartError);
    expect((error as SandboxStartError).message).toMatch(/scope key session:someone-else/);
    expect((error as SandboxStartError).fix).toContain(`cordon sandbox rm ${s.containerName}`);
    expect(await containerState(s.containerName)).toBe("running");
  });

  it("keeps a busy container on config drift and recreates it once idle", async () => {
    const s = spec("drift");
    const held = await acquire(s);
    const drifted = { ...s, configHash: "v2" };
    const whileHeld = await acquire(drifted);
    expect(idOf(whileHeld)).toBe(idOf(held));
    expect(whileHeld.stale).toBe(true);
    expect(whileHeld.warnings.join("\n")).toMatch(/older config/);
    await whileHeld.release();
    await held.release();
    const idle = await acquire(drifted);
    expect(idle.fresh).toBe(true);
    expect(idle.stale).toBe(false);
    expect(idOf(idle)).not.toBe(idOf(held));
    const labels = (await docker.getContainer(s.containerName).inspect()).Config.Labels;
    expect(labels[labelKeys.configHash]).toBe("v2");
    await idle.release();
    // Back to v1 while a command runs in it (as another process's agent would): busy, kept.
    const running = recorded(idle.sandbox).run("sleep 30");
    await expect
      .poll(
        async () =>
          ((await docker.getContainer(s.containerName).top()) as { Processes: unknown[] }).Processes
            .length,
        // Generous: the machine may be busy; the poll ends as soon as the command runs.
        { timeout: 30_000 },
      )
      .toBeGreaterThan(2);
    const busy = await acquire(s);
    expect(busy.stale).toBe(true);
    expect(idOf(busy)).toBe(idOf(idle));
    await docker.getContainer(s.containerName).kill();
    await running.catch(() => undefined);
  });

  it("replaces a container that was killed, keeping its private workspace", async () => {
    const s = spec("killed");
    const first = await acquire(s);
    await recorded(first.sandbox).run("echo kept > /workspace/notes");
    await first.release();
    await docker.getContainer(idOf(first)).kill();
    const second = await acquire(s);
    expect(second.fresh).toBe(true);
    expect(idOf(second)).not.toBe(idOf(first));
    expect((await recorded(second.sandbox).run("cat /workspace/notes")).stdout).toBe("kept\n");
  });

  it("starts a stopped container again in place", async () => {
    const s = spec("stopped");
    const first = await acquire(s);
    await first.release();
    await docker.getContainer(idOf(first)).stop({ t: 60 });
    expect((await docker.getContainer(idOf(first)).inspect()).State.ExitCode).toBe(143);
    const second = await acquire(s);
    expect(second.fresh).toBe(false);
    expect(idOf(second)).toBe(idOf(first));
    expect(await containerState(s.containerName)).toBe("running");
  });

  it("starts a container another process created but never started, or replaces it", async () => {
    const s = spec("never-started");
    // As the process that died left it: the container user's (cordon refuses any other).
    await mkdir(s.privateWorkspace ?? "", { recursive: true });
    await chown(s.privateWorkspace ?? "", 1000, 1000);
    // Left behind as if a process died between create and start.
    const orphan = await docker.createContainer(
      createContainerOptions({
        spec: s,
        image,
        createdAt: new Date().toISOString(),
        extraLabels: testLabel,
        stateDirectory: path.resolve(stateDirectory),
      }),
    );
    const lease = await acquire(s);
    expect(idOf(lease)).toBe(orphan.id);
    expect(await containerState(s.containerName)).toBe("running");

    // The same, but it cannot start (a tmpfs option runc refuses): replaced by a fresh one.
    const broken = spec("never-starts");
    await mkdir(broken.privateWorkspace ?? "", { recursive: true });
    await chown(broken.privateWorkspace ?? "", 1000, 1000);
    const unstartable = await docker.createContainer(
      createContainerOptions({
        spec: { ...broken, docker: { ...broken.docker, tmpfs: { "/tmp": "size=bogus" } } },
        image,
        createdAt: new Date().toISOString(),
        extraLabels: testLabel,
        stateDirectory: path.resolve(stateDirectory),
      }),
    );
    const replaced = await acquire(broken);
    expect(replaced.fresh).toBe(true);
    expect(idOf(replaced)).not.toBe(unstartable.id);
  });

  it("recovers a held sandbox whose container died mid-session", async () => {
    const s = spec("recover");
    const lease = await acquire(s);
    const { container } = recorded(lease.sandbox);
    expect(await container.recover()).toBe(container.containerId);
    await docker.getContainer(container.containerId).kill();
    const replacement = await container.recover();
    expect(replacement).not.toBe(container.containerId);
    expect((await docker.getContainer(replacement).inspect()).State.Running).toBe(true);
    // Still held: the replacement is not taken for an idle container by a drifted acquire.
    const drifted = await acquire({ ...s, configHash: "v2" });
    expect(drifted.stale).toBe(true);
    expect(idOf(drifted)).toBe(replacement);
  });

  it("removes what it made when the container cannot start, and reports why", async () => {
    // An invalid tmpfs option passes create and fails when runc mounts it at start.
    const atStart = spec("bad-start", {});
    atStart.docker = { ...atStart.docker, tmpfs: { "/tmp": "size=bogus" } };
    const error = await manager.acquire(atStart).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxStartError);
    expect((error as SandboxStartError).exitCode).toBe(ExitCode.sandbox);
    expect((error as SandboxStartError).message).toMatch(/start the sandbox container/);
    expect(await containerState(atStart.containerName)).toBeUndefined();

    const atCreate = spec("bad-runtime");
    atCreate.docker = { ...atCreate.docker, runtime: "cordon-no-such-runtime" };
    const createError = await manager.acquire(atCreate).catch((e: unknown) => e);
    expect(createError).toBeInstanceOf(SandboxStartError);
    expect((createError as SandboxStartError).fix).toMatch(/sandbox.docker.runtime/);
    expect(await containerState(atCreate.containerName)).toBeUndefined();
  });

  it("fails with exit code 3 when no engine answers, before touching the disk", async () => {
    const down = new DockerSandboxManager({
      engine: new DockerEngine({ host: `unix://${path.join(root, "no-docker.sock")}` }),
      stateDirectory: path.join(root, "down-home"),
      extraLabels: testLabel,
      createSandbox: createRecordingSandbox,
    });
    const error = await down.acquire(spec("down")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DockerUnavailableError);
    expect((error as DockerUnavailableError).exitCode).toBe(ExitCode.sandbox);
    expect((error as DockerUnavailableError).fix).toMatch(/Docker engine/);
    await expect(stat(path.join(root, "down-home"))).rejects.toThrow(/ENOENT/);
  });

  it("stops at once when the acquire is aborted", async () => {
    const s = spec("aborted");
    await expect(manager.acquire(s, { signal: AbortSignal.abort() })).rejects.toThrow(AbortedError);
    expect(await containerState(s.containerName)).toBeUndefined();
  });

  it("names the command when a configured image is missing", async () => {
    const s = spec("no-image");
    s.docker = {
      ...s.docker,
      image: { source: "config", reference: "cordon-test-no-such-image:1", configKey: "image" },
    };
    const error = await manager.acquire(s).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ImageError);
    expect((error as ImageError).fix).toContain("docker pull cordon-test-no-such-image:1");
  });

  it("seeds a private copy of a git workspace the container user can work in", async () => {
    const repo = path.join(root, "repo");
    await mkdir(repo);
    const git = (...args: string[]) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@e", ...args], { cwd: repo });
    git("init", "-q");
    await writeFile(path.join(repo, ".gitignore"), "secret.env\n");
    await writeFile(path.join(repo, "README.md"), "hello\n");
    await symlink("/etc/hostname", path.join(repo, "host-link"));
    git("add", ".");
    git("commit", "-qm", "init");
    await writeFile(path.join(repo, "secret.env"), "API_KEY=sk-secret\n");
    await writeFile(path.join(repo, "draft.txt"), "untracked\n");

    const s = spec("seeded", { agentWorkspace: repo, seed: true });
    const progress: string[] = [];
    const lease = await manager.acquire(s, { onProgress: (e) => progress.push(e.phase) });
    leases.push(lease);
    expect(progress).toEqual(expect.arrayContaining(["workspace", "create", "start"]));
    const copy = s.privateWorkspace ?? "";
    expect((await lstat(copy)).uid).toBe(1000);
    expect(await readlink(path.join(copy, "host-link"))).toBe("/etc/hostname");

    const inside = await recorded(lease.sandbox).run(
      [
        "ls -A /workspace | sort | tr '\\n' ' '",
        "echo",
        "git status --porcelain",
        "echo change >> README.md && git diff --stat | tail -1",
        // The link resolves inside the container, to the container's own file, not the host's.
        `test "$(cat host-link)" = "$(cat /etc/hostname)" && echo container-hostname`,
      ].join("; "),
    );
    expect(inside.stdout).toBe(
      [
        ".git .gitignore README.md draft.txt host-link ",
        "?? draft.txt",
        " 1 file changed, 1 insertion(+)",
        "container-hostname",
        "",
      ].join("\n"),
    );
    // The user's repository is untouched.
    expect(await readFile(path.join(repo, "README.md"), "utf8")).toBe("hello\n");
    expect((await stat(path.join(repo, "README.md"))).uid).toBe(0);
  });

  it("refuses an rw workspace the container user cannot write, naming the fix, and never chowns it", async () => {
    const workspace = path.join(root, "rw-workspace");
    await mkdir(workspace, { mode: 0o755 });
    const s = spec("rw", {
      workspaceAccess: "rw",
      agentWorkspace: workspace,
      privateWorkspace: undefined,
      mounts: [{ source: workspace, target: "/workspace", readOnly: false, role: "workspace" }],
    });
    // Every edit would fail with "Permission denied": no lease, so no agent turn runs on it.
    const refused = acquire(s);
    await expect(refused).rejects.toBeInstanceOf(SandboxStartError);
    await expect(refused).rejects.toMatchObject({
      exitCode: ExitCode.sandbox,
      message: expect.stringMatching(
        /the sandbox user 1000:1000 cannot write \/workspace .*owner 0:0, mode 755/,
      ) as unknown,
      fix: expect.stringMatching(/^give uid 1000 write access to it/) as unknown,
    });
    expect((await stat(workspace)).uid).toBe(0);
  });

  it("mounts an ro agent workspace read-only at /agent beside a writable private /workspace", async () => {
    const agent = path.join(root, "ro-agent");
    await mkdir(agent);
    await writeFile(path.join(agent, "source.txt"), "read me\n");
    const base = spec("ro", { workspaceAccess: "ro", agentWorkspace: agent });
    const s: SandboxSpec = {
      ...base,
      mounts: [
        ...base.mounts,
        { source: agent, target: "/agent", readOnly: true, role: "agent-workspace" },
      ],
    };
    const lease = await acquire(s);
    const result = await recorded(lease.sandbox).run(
      "cat /agent/source.txt; touch /agent/x 2>&1; touch /workspace/scratch && echo scratch-ok",
    );
    expect(result.stdout).toMatch(/^read me\n.*Read-only file system\nscratch-ok\n$/s);
    await expect(stat(path.join(agent, "x"))).rejects.toThrow(/ENOENT/);
  });

  it("does not count a lease whose sandbox could not be made", async () => {
    const failing = new DockerSandboxManager({
      engine,
      stateDirectory,
      image,
      extraLabels: testLabel,
      createSandbox: () => {
        throw new Error("no sandbox today");
      },
    });
    const s = spec("no-sandbox");
    await expect(failing.acquire(s)).rejects.toThrow(/no sandbox today/);
    expect(failing.holderCount(s.containerName)).toBe(0);
  });

  it("prunes idle sandboxes in the background after an acquire, never one it holds", async () => {
    const pruning = new DockerSandboxManager({
      engine,
      stateDirectory,
      image,
      extraLabels: testLabel,
      createSandbox: createRecordingSandbox,
      // No limits of its own: the acquire brings them (the plan's sandbox.prune).
      prune: { everyMs: 0 },
    });
    const limits = { prune: { idleMs: 3_600_000, maxAgeMs: 0 } };
    const heldSpec = spec("auto-held");
    const idleSpec = spec("auto-idle");
    const stoppedSpec = spec("auto-stopped");
    const held = await acquire(heldSpec, pruning);
    await (await acquire(idleSpec, pruning)).release();
    const stopped = await acquire(stoppedSpec, pruning);
    await stopped.release();
    await docker.getContainer(stoppedSpec.containerName).kill();
    // A workspace whose container was removed by hand, recently used: its work is kept.
    const orphanSpec = spec("auto-orphan");
    await (await acquire(orphanSpec, pruning)).release();
    await docker.getContainer(orphanSpec.containerName).remove({ force: true });
    await pruning.flush();
    for (const name of [heldSpec.containerName, idleSpec.containerName]) {
      await ageRecord(name, 2);
    }
    await pruning.acquire(spec("auto-trigger"), limits).then((lease) => leases.push(lease));
    await pruning.flush();
    expect(await containerState(idleSpec.containerName)).toBeUndefined();
    await expect(stat(idleSpec.privateWorkspace ?? "")).rejects.toThrow(/ENOENT/);
    expect(await containerState(heldSpec.containerName)).toBe("running");
    expect(await containerState(stoppedSpec.containerName)).toBe("exited");
    expect((await stat(orphanSpec.privateWorkspace ?? "")).isDirectory()).toBe(true);
    await held.release();
  });

  it("keeps marking a held sandbox used, so other processes never see it idle", async () => {
    const beating = new DockerSandboxManager({
      engine,
      stateDirectory,
      image,
      extraLabels: testLabel,
      createSandbox: createRecordingSandbox,
      heartbeatMs: 20,
    });
    const s = spec("heartbeat");
    const lease = await acquire(s, beating);
    await ageRecord(s.containerName, 5);
    await expect
      .poll(async () => Date.now() - Date.parse((await readRecord(s.containerName)).lastUsedAt), {
        timeout: 30_000,
      })
      .toBeLessThan(3_600_000);
    await lease.release();
  });

  it("recreates an idle container when its image tag now names another image", async () => {
    const tag = { repo: "cordon-test-retagged", tag: String(process.pid) };
    const reference = `${tag.repo}:${tag.tag}`;
    testImages.push(reference);
    await docker.getImage(image).tag(tag);
    const s = spec("retagged");
    s.docker = { ...s.docker, image: { source: "config", reference, configKey: "image" } };
    const first = await acquire(s);
    await first.release();
    // A rebuild (or pull) moves the tag; the base image stands in for the newer build.
    const base = (await docker.getImage(image).inspect()).Parent;
    const other = base || (await docker.listImages()).find((i) => !i.RepoTags?.includes(image))?.Id;
    await docker.getImage(other ?? "").tag(tag);
    // A new manager: an earlier one remembers what the tag named when it first looked.
    const second = await acquire(s, newManager());
    expect(second.fresh).toBe(true);
    expect(idOf(second)).not.toBe(idOf(first));
    expect((await docker.getContainer(s.containerName).inspect()).Image).toBe(
      (await docker.getImage(reference).inspect()).Id,
    );
  });

  it("builds the built-in image when it is missing, reporting progress", async () => {
    // A one-line recipe gives a tag that does not exist yet; the build is config-only and quick.
    const dockerfile = path.join(root, "tiny.Dockerfile");
    await writeFile(
      dockerfile,
      `ARG BASE_IMAGE\nFROM \${BASE_IMAGE}\nLABEL cordon.test.build="${process.pid}-${Date.now()}"\n`,
    );
    const latest = await docker
      .getImage("cordon-sandbox:latest")
      .inspect()
      .then(
        (info) => info.Id,
        () => undefined,
      );
    const building = new DockerSandboxManager({
      engine,
      stateDirectory,
      // The build hashes (and fetches) the real Node.js pins even though this recipe ignores them.
      imageOptions: {
        dockerfilePath: dockerfile,
        runtimePinsPath: path.resolve("images", "node-runtime.json"),
      },
      extraLabels: testLabel,
      createSandbox: createRecordingSandbox,
    });
    const events: string[] = [];
    try {
      const lease = await building.acquire(spec("built"), {
        onProgress: (event) => events.push(`${event.phase}: ${event.message}`),
      });
      leases.push(lease);
      const built = (await docker.getContainer(lease.containerName).inspect()).Config.Image;
      testImages.push(built);
      expect(built).toMatch(/^cordon-sandbox:[0-9a-f]{12}$/);
      expect(built).not.toBe(image);
      expect(events[0]).toMatch(/^image: building the sandbox image cordon-sandbox:/);
      expect(events).toContainEqual(expect.stringMatching(/^image: \[\d+\/\d+ \d+\.\ds\] /));
      expect(events).toContainEqual(
        expect.stringMatching(new RegExp(`^image: built ${built} in \\d+\\.\\ds$`)),
      );
    } finally {
      // The build moved `latest`; put it back for everyone else.
      if (latest) {
        await docker.getImage(latest).tag({ repo: "cordon-sandbox", tag: "latest" });
      }
    }
  });
});
