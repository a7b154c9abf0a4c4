/**
 * sandbox.disk, mounted as an attack: an agent that writes more than its budget to /workspace gets
 * ENOSPC inside the sandbox, and the host gives the workspace no more than the budget. The bounded
 * workspace still works as a seeded copy (owners, baseline, `cordon diff`), survives its mount
 * going away (a host reboot), and `cordon sandbox rm` leaves no mount, loop device or image.
 */
import { execFile } from "node:child_process";
import { lstat, mkdir, mkdtemp, readFile, rm, stat, statfs, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { RunPlan } from "../../src/policy/index.js";
import {
  DockerEngine,
  SandboxInventory,
  diskImagePath,
  ensurePrivateWorkspace,
  mountCountAt,
  overrideDiskBudgetSupport,
  releaseWorkspaceDisk,
} from "../../src/sandbox/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { loopBackingFiles } from "../support/loop-devices.js";
import { runCordon } from "../support/run-cli.js";
import { testSandboxSpec } from "../support/sandbox-spec.js";
import { removeStateDirectory } from "../support/state-directory.js";

const run = promisify(execFile);
const budget = 64 * 1024 ** 2;

describe("sandbox.disk bounds the private workspace", () => {
  let root: string;
  let home: string;
  let repo: string;
  let config: string;
  const session = `disk-${process.pid}-${Date.now().toString(36)}`;
  const cordon = (...args: string[]) =>
    runCordon(args, { CORDON_HOME: home, CORDON_CONFIG: config });
  const inSandbox = (script: string) =>
    cordon("exec", "--workspace", repo, "--session", session, "--", "sh", "-c", script);
  let workspace: string;
  let containerName: string;

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-disk-"));
    home = path.join(root, "home");
    config = path.join(root, "cordon.json5");
    await writeFile(config, `{ agents: { defaults: { sandbox: { disk: "64m" } } } }\n`);
    repo = await demoRepo();
    const explained = await cordon(
      "sandbox",
      "explain",
      "--json",
      "--workspace",
      repo,
      "--session",
      session,
    );
    const spec = (JSON.parse(explained.stdout) as RunPlan).sandbox.spec;
    workspace = spec?.privateWorkspace ?? "";
    containerName = spec?.containerName ?? "";
    expect(spec?.diskBytes).toBe(budget);
  });

  afterAll(async () => {
    await cordon("sandbox", "rm", "--all", "--discard-changes").catch(() => undefined);
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("holds the seeded copy, owned by the container user, with its baseline for cordon diff", async () => {
    const seeded = await inSandbox(
      "stat -c '%u:%g' /workspace /workspace/pricing.py; id -u; id -g; ls -A /workspace; " +
        "printf '# changed in the sandbox\\n' >> /workspace/pricing.py",
    );
    expect(seeded.exitCode).toBe(0);
    const [rootOwner, fileOwner, uid, gid, ...listing] = seeded.stdout.trim().split("\n");
    expect(rootOwner).toBe(`${uid}:${gid}`);
    expect(fileOwner).toBe(`${uid}:${gid}`);
    expect(listing).toContain("pricing.py");
    expect(listing).toContain(".git");
    // mkfs's lost+found is removed: the agent sees only the copy.
    expect(listing).not.toContain("lost+found");
    expect(await mountCountAt(workspace)).toBe(1);

    const diff = await cordon("diff", "--workspace", repo, "--session", session);
    expect(diff.exitCode).toBe(0);
    expect(diff.stdout).toContain("pricing.py");
    expect(diff.stdout).toContain("+# changed in the sandbox");
  });

  it("fails a write past the budget with ENOSPC inside the sandbox; the host gives it no more", async () => {
    const filled = await inSandbox(
      "dd if=/dev/zero of=/workspace/fill bs=1M count=100; echo dd-exit=$?; stat -c %s /workspace/fill",
    );
    expect(filled.stdout + filled.stderr).toContain("No space left on device");
    expect(filled.stdout).toContain("dd-exit=1");
    const written = Number(filled.stdout.trim().split("\n").at(-1));
    expect(written).toBeGreaterThan(32 * 1024 ** 2);
    expect(written).toBeLessThan(budget);

    // Everything the sandbox wrote is in the image, and the image holds at most the budget.
    const image = await stat(diskImagePath(workspace));
    expect(image.size).toBe(budget);
    expect(image.blocks * 512).toBeLessThanOrEqual(budget);
    const mounted = await statfs(workspace);
    expect(mounted.blocks * mounted.bsize).toBeLessThanOrEqual(budget);

    // Freed space goes back to the host (discard punches holes in the image).
    await inSandbox("rm /workspace/fill && sync");
    await expect
      .poll(async () => (await stat(diskImagePath(workspace))).blocks * 512, { timeout: 15_000 })
      .toBeLessThan(16 * 1024 ** 2);
  });

  it("mounts the image again when its mount is gone (a host reboot), with the work kept", async () => {
    await run("docker", ["stop", "-t", "1", containerName]);
    await run("umount", [workspace]);
    expect(await mountCountAt(workspace)).toBe(0);

    const again = await inSandbox("tail -n 1 /workspace/pricing.py");
    expect(again.exitCode).toBe(0);
    expect(again.stdout).toContain("# changed in the sandbox");
    expect(await mountCountAt(workspace)).toBe(1);
  });

  it("cordon sandbox rm --keep-workspace unmounts and keeps the image; the next exec mounts it again", async () => {
    const image = diskImagePath(workspace);
    const kept = await cordon("sandbox", "rm", containerName, "--keep-workspace");
    expect(kept.exitCode).toBe(0);
    expect(await mountCountAt(workspace)).toBe(0);
    expect(await lstat(image).catch(() => undefined)).toBeDefined();

    const again = await inSandbox("tail -n 1 /workspace/pricing.py");
    expect(again.exitCode).toBe(0);
    expect(again.stdout).toContain("# changed in the sandbox");
    expect(await mountCountAt(workspace)).toBe(1);
  });

  it("cordon sandbox rm leaves no mount, no loop device and no image", async () => {
    const image = diskImagePath(workspace);
    expect(await loopBackingFiles()).toContain(image);
    const removed = await cordon("sandbox", "rm", containerName, "--discard-changes");
    expect(removed.exitCode).toBe(0);
    expect(await mountCountAt(workspace)).toBe(0);
    expect(await lstat(image).catch(() => undefined)).toBeUndefined();
    expect(await lstat(workspace).catch(() => undefined)).toBeUndefined();
    // The loop device is released with the last mount (autoclear), not left holding the file.
    await expect
      .poll(async () => (await loopBackingFiles()).filter((f) => f.startsWith(image)))
      .toEqual([]);
  });

  it("prune unmounts and deletes the image of a workspace whose container was removed by hand", async () => {
    const orphan = `${session}-orphan`;
    const made = await cordon("exec", "--workspace", repo, "--session", orphan, "--", "true");
    expect(made.exitCode).toBe(0);
    const explained = await cordon(
      "sandbox",
      "explain",
      "--json",
      "--workspace",
      repo,
      "--session",
      orphan,
    );
    const spec = (JSON.parse(explained.stdout) as RunPlan).sandbox.spec;
    const target = spec?.privateWorkspace ?? "";
    expect(await mountCountAt(target)).toBe(1);
    await run("docker", ["rm", "-f", spec?.containerName ?? ""]);

    const report = await new SandboxInventory({
      engine: new DockerEngine(),
      stateDirectory: home,
    }).prune({ orphanMinAgeMs: 0 });
    expect(report.orphans.map((o) => o.path)).toContain(target);
    expect(await mountCountAt(target)).toBe(0);
    expect(await lstat(diskImagePath(target)).catch(() => undefined)).toBeUndefined();
    expect(await lstat(target).catch(() => undefined)).toBeUndefined();
    await expect
      .poll(async () =>
        (await loopBackingFiles()).filter((f) => f.startsWith(diskImagePath(target))),
      )
      .toEqual([]);
  });

  it("an orphan with unapplied work: list names it, prune unmounts it and keeps its image, discarding frees all", async () => {
    const orphan = `${session}-work`;
    const made = await cordon(
      "exec",
      "--workspace",
      repo,
      "--session",
      orphan,
      "--",
      "sh",
      "-c",
      "echo wip > partial.txt",
    );
    expect(made.exitCode, made.stderr).toBe(0);
    const explained = await cordon(
      "sandbox",
      "explain",
      "--json",
      "--workspace",
      repo,
      "--session",
      orphan,
    );
    const spec = (JSON.parse(explained.stdout) as RunPlan).sandbox.spec;
    const target = spec?.privateWorkspace ?? "";
    const image = diskImagePath(target);
    expect(await mountCountAt(target)).toBe(1);
    // Gone behind cordon's back, as `docker rm -f` or a CI cleanup does it: the raw engine API.
    await dockerClient()
      .getContainer(spec?.containerName ?? "")
      .remove({ force: true });

    const listed = await cordon("sandbox", "list");
    expect(listed.stderr).toContain(
      `orphaned workspace ${target} of ${spec?.containerName}: a mounted disk image, holding a loop device, whose container is gone`,
    );

    const doctor = await cordon("doctor", "--json");
    const orphans = (
      JSON.parse(doctor.stdout) as { checks: { name: string; status: string; detail: string }[] }
    ).checks.find((check) => check.name === "orphans");
    expect(orphans?.status).toBe("warn");
    expect(orphans?.detail).toContain("still mounted (each holds a loop device)");

    const inventory = new SandboxInventory({ engine: new DockerEngine(), stateDirectory: home });
    const kept = await inventory.prune({ orphanMinAgeMs: 0 });
    expect(kept.keptForChanges.map((k) => [k.workspace, k.changes?.changedFiles])).toEqual([
      [target, 1],
    ]);
    expect(await mountCountAt(target)).toBe(0);
    expect(await lstat(image).catch(() => undefined)).toBeDefined();
    await expect
      .poll(async () => (await loopBackingFiles()).filter((f) => f.startsWith(image)))
      .toEqual([]);

    const discarded = await inventory.prune({ orphanMinAgeMs: 0, discardChanges: true });
    expect(discarded.orphans.map((o) => o.path)).toContain(target);
    expect(await lstat(image).catch(() => undefined)).toBeUndefined();
    expect(await lstat(target).catch(() => undefined)).toBeUndefined();
    // No loop device holds a file of this state directory: `rm -rf` of it works.
    await expect
      .poll(async () => (await loopBackingFiles()).filter((f) => f.startsWith(home)))
      .toEqual([]);
  });

  it("two acquires racing to make one workspace mount it once", async () => {
    const state = path.join(root, "race");
    await mkdir(state, { recursive: true });
    const target = path.join(state, "workspaces", "cordon-race");
    const spec = testSandboxSpec("race", {
      spec: { privateWorkspace: target, diskBytes: 32 * 1024 ** 2, agentWorkspace: repo },
    });
    // A half-built image left by a process that died (no pid is above 2^22).
    await mkdir(path.dirname(target), { recursive: true });
    const abandoned = `${diskImagePath(target)}.tmp-4194305-dead`;
    await writeFile(abandoned, "half an image");
    try {
      const results = await Promise.all([
        ensurePrivateWorkspace(spec, { stateDirectory: state }),
        ensurePrivateWorkspace(spec, { stateDirectory: state }),
      ]);
      expect(results.filter((r) => r.created)).toHaveLength(1);
      // A second mount over the first would hide its files from whoever already has it open.
      expect(await mountCountAt(target)).toBe(1);
      expect(await lstat(abandoned).catch(() => undefined)).toBeUndefined();
    } finally {
      await releaseWorkspaceDisk(target);
    }
    expect(await mountCountAt(target)).toBe(0);
    expect(await lstat(diskImagePath(target)).catch(() => undefined)).toBeUndefined();
  });
});

describe("a changed sandbox.disk", () => {
  it("keeps an existing workspace's budget and files, and says how to get the new one", async () => {
    const state = await mkdtemp(path.join(tmpdir(), "cordon-disk-change-"));
    const target = path.join(state, "workspaces", "cordon-change");
    const spec = (diskBytes: number) =>
      testSandboxSpec("change", { spec: { privateWorkspace: target, diskBytes } });
    try {
      await ensurePrivateWorkspace(spec(32 * 1024 ** 2), { stateDirectory: state });
      await writeFile(path.join(target, "work"), "kept\n");
      const again = await ensurePrivateWorkspace(spec(64 * 1024 ** 2), { stateDirectory: state });
      expect(again.warnings.join("\n")).toMatch(
        /has a disk budget of 32 MiB; sandbox\.disk \(64 MiB\) applies to new workspaces \(`cordon sandbox rm cordon-change`/,
      );
      expect(await readFile(path.join(target, "work"), "utf8")).toBe("kept\n");
      expect(await mountCountAt(target)).toBe(1);
    } finally {
      await removeStateDirectory(state);
    }
    expect(await mountCountAt(target)).toBe(0);
  });
});

describe("sandbox.disk where the machine cannot mount (the watchdog)", () => {
  let root: string;
  let home: string;
  let repo: string;
  let config: string;
  const session = `disk-watch-${process.pid}-${Date.now().toString(36)}`;
  const cordon = (...args: string[]) =>
    runCordon(args, { CORDON_HOME: home, CORDON_CONFIG: config });
  const inSandbox = (script: string) =>
    cordon("exec", "--workspace", repo, "--session", session, "--", "sh", "-c", script);

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-disk-watch-"));
    home = path.join(root, "home");
    config = path.join(root, "cordon.json5");
    await writeFile(config, `{ agents: { defaults: { sandbox: { disk: "64m" } } } }\n`);
    repo = await demoRepo();
    // As on a machine without the right to mount (cordon not run as root).
    overrideDiskBudgetSupport({
      enforced: false,
      reason: "cordon runs without the right to mount filesystems (test)",
      fix: "run cordon as root",
    });
  });

  afterAll(async () => {
    overrideDiskBudgetSupport(undefined);
    await cordon("sandbox", "rm", "--all", "--discard-changes").catch(() => undefined);
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("cordon doctor warns that the budget is not enforced, with the fix, and stays green", async () => {
    const run = await cordon("doctor", "--json");
    const report = JSON.parse(run.stdout) as {
      ok: boolean;
      checks: { name: string; status: string; detail: string; fix?: string }[];
    };
    expect(report.checks.find((c) => c.name === "disk")).toEqual({
      name: "disk",
      status: "warn",
      detail: expect.stringMatching(
        /^sandbox\.disk is not enforced: cordon runs without the right to mount .*plain directories/,
      ) as unknown,
      fix: "run cordon as root",
    });
    expect(run.exitCode).toBe(0);
  });

  it("says the budget is not enforced, stops a sandbox that writes past it, and starts none on it again", async () => {
    const explained = await cordon("sandbox", "explain", "--workspace", repo, "--session", session);
    expect(explained.stdout).toMatch(
      /! sandbox\.disk is not enforced: cordon runs without the right to mount/,
    );

    // The agent fills the workspace and keeps running: the watchdog (every 10 s) stops it. That
    // "survived" never prints is the proof it was stopped, not a clock (tests assert outcomes).
    const filled = await inSandbox(
      "dd if=/dev/zero of=/workspace/fill bs=1M count=100 2>/dev/null; sleep 60; echo survived",
    );
    expect(filled.stderr).toMatch(/sandbox\.disk is not enforced/);
    expect(filled.stdout).not.toContain("survived");
    // The command cut off says why, not just that its container stopped.
    expect(filled.exitCode).toBe(3);
    expect(filled.stderr).toMatch(
      /the sandbox wrote 1\d\d MiB to its private workspace .*more than sandbox\.disk allows \(64 MiB\); cordon stopped it/,
    );

    const again = await inSandbox("echo started");
    expect(again.exitCode).toBe(3);
    expect(again.stdout).not.toContain("started");
    expect(again.stderr).toMatch(
      /the sandbox wrote 1\d\d MiB to its private workspace .*more than sandbox\.disk allows \(64 MiB\); cordon stopped it/,
    );
    expect(again.stderr).toMatch(/cordon sandbox rm/);
  });
});

describe("sandbox.disk on a writable root filesystem (readOnlyRoot false)", () => {
  let root: string;
  let home: string;
  let repo: string;
  let config: string;
  const session = `disk-root-${process.pid}-${Date.now().toString(36)}`;
  const cordon = (...args: string[]) =>
    runCordon(args, { CORDON_HOME: home, CORDON_CONFIG: config });
  const inSandbox = (script: string) =>
    cordon("exec", "--workspace", repo, "--session", session, "--", "sh", "-c", script);

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-disk-root-"));
    home = path.join(root, "home");
    config = path.join(root, "cordon.json5");
    await writeFile(
      config,
      // Without its tmpfs, /var/tmp is on the root layer (HOME and /tmp are tmpfs mounts).
      `{ agents: { defaults: { sandbox: { disk: "64m", docker: { readOnlyRoot: false, tmpfs: { "/var/tmp": null } } } } } }\n`,
    );
    repo = await demoRepo();
  });

  afterAll(async () => {
    await cordon("sandbox", "rm", "--all", "--discard-changes").catch(() => undefined);
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("stops a sandbox that writes past the budget outside /workspace, and starts none on that root again", async () => {
    // The engine cannot bound overlay2 on ext4: the watchdog (every 10 s) measures the root layer.
    const filled = await inSandbox(
      "dd if=/dev/zero of=/var/tmp/fill bs=1M count=100 2>/dev/null; sleep 60; echo survived",
    );
    expect(filled.stdout).not.toContain("survived");
    expect(filled.stderr).toMatch(/to its root filesystem .*cordon stopped it/);

    const again = await inSandbox("echo started");
    expect(again.exitCode).toBe(3);
    expect(again.stdout).not.toContain("started");
    expect(again.stderr).toMatch(
      /the sandbox wrote 1\d\d MiB to its root filesystem \(sandbox\.docker\.readOnlyRoot is false\), more than sandbox\.disk allows \(64 MiB\)/,
    );
    expect(again.stderr).toMatch(/gives it a fresh root/);
  });
});
