/**
 * Forks of a private copy kept in Docker volumes (`sandbox.workspaceStorage: "volume"`), on the
 * local engine: the fork sees its parent's changes — a file edited, one a shell command created,
 * one deleted, a chmod — and after the fork each changes alone; the fork's copy, baseline and
 * checkpoint store are volumes of its own (nothing of it on this host), its diff shows every change
 * since the repository and `cordon apply` from it writes the repository. The parent's links aimed
 * at the inspector's mounts reach nothing, and no sandbox mounts a baseline volume.
 */
import { lstat, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createRunner, type Runner } from "../../src/index.js";
import { privateWorkspacePath } from "../../src/sandbox/index.js";
import { demoRepo, git } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

const sessionOf = (name: string): string => `vf-${name}-${process.pid}-${Date.now().toString(36)}`;

/** The volumes of `home`, by name, with their labels. */
async function volumesOf(home: string): Promise<Map<string, Record<string, string>>> {
  const listed = await dockerClient().listVolumes({
    filters: { label: [`cordon.home=${home}`] },
  });
  return new Map((listed.Volumes ?? []).map((v) => [v.Name, v.Labels ?? {}]));
}

describe("forks of a copy in volumes", () => {
  let root: string;
  let home: string;
  let repo: string;
  let env: NodeJS.ProcessEnv;
  const runnerOf = (): Runner => createRunner({ cwd: repo, workspace: repo, env, onClose: "keep" });
  const cordon = (command: string, ...args: string[]) =>
    runCordon([command, "--workspace", repo, ...args], { ...env, CORDON_LOG_LEVEL: "silent" });
  const inSandbox = async (runner: Runner, sessionKey: string, command: string) => {
    const held = await runner.acquireSandbox({ sessionKey });
    try {
      return await held.lease.sandbox.exec(command);
    } finally {
      await held.lease.release();
    }
  };

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-volume-forks-"));
    home = path.join(root, "home");
    const config = path.join(root, "cordon.json5");
    await writeFile(
      config,
      '{ agents: { defaults: { sandbox: { workspaceStorage: "volume" } } } }\n',
    );
    repo = await demoRepo();
    env = { ...process.env, CORDON_HOME: home, CORDON_CONFIG: config, ANTHROPIC_API_KEY: "" };
  });

  afterAll(async () => {
    await runCordon(["sandbox", "rm", "--all", "--discard-changes"], env);
    for (const name of (await volumesOf(home)).keys()) {
      await dockerClient()
        .getVolume(name)
        .remove()
        .catch(() => undefined);
    }
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("a fork sees its parent's edits, creations, deletions and modes in volumes of its own, then each changes alone; its diff and apply reach the repository", async () => {
    const parent = sessionOf("parent");
    const child = sessionOf("child");
    await using runner = runnerOf();
    await inSandbox(
      runner,
      parent,
      [
        "echo '# edited' >> pricing.py",
        "mkdir -p made && echo new > made/file.txt",
        "rm README.md",
        "chmod +x test_pricing.py",
        "echo 'build/' > .gitignore && mkdir -p build && echo out > build/out",
        // Links at where the fork inspector mounts the parent's baseline and the fork's copy:
        // copied as links, followed by nothing.
        "ln -s /baseline/HEAD baseline-head && ln -s /fork fork-dir",
      ].join(" && "),
    );

    const forked = await runner.forkSandbox({ sessionKey: parent, as: child });
    const forkName = forked.plan.sandbox.spec?.containerName ?? "";
    const parentName = (await runner.plan({ sessionKey: parent })).sandbox.spec?.containerName;
    try {
      const seen = await forked.lease.sandbox.exec(
        "tail -1 pricing.py; cat made/file.txt; ls README.md; stat -c %a test_pricing.py; cat build/out; readlink baseline-head fork-dir",
      );
      expect(seen.stdout).toMatch(/^# edited\nnew\n/);
      expect(seen.stdout).toMatch(/\n755\nout\n\/baseline\/HEAD\n\/fork\n$/);
      expect(seen.stderr).toMatch(/README\.md/);
      await forked.lease.sandbox.exec("echo fork > fork-only.txt && rm made/file.txt");
    } finally {
      await forked.lease.release();
    }

    // Volumes of its own, labelled as its; nothing of its copy on this host.
    const volumes = await volumesOf(home);
    for (const role of ["workspace", "baseline", "checkpoints"]) {
      expect(volumes.get(`${forkName}-${role}`)).toMatchObject({
        "cordon.volume-of": forkName,
        "cordon.volume-role": role,
      });
    }
    await expect(lstat(privateWorkspacePath(home, forkName))).rejects.toThrow(/ENOENT/);
    // The baseline is cordon's: no sandbox mounts one, and each mounts its own copy alone.
    for (const name of [forkName, parentName ?? ""]) {
      const mounts = (await dockerClient().getContainer(name).inspect()).Mounts;
      const named = mounts.map((mount) => mount.Name ?? "");
      expect(named.filter((volume) => volume.endsWith("-baseline"))).toEqual([]);
      expect(named.filter((volume) => volume.endsWith("-workspace"))).toEqual([
        `${name}-workspace`,
      ]);
    }

    await inSandbox(runner, parent, "echo parent > parent-only.txt && echo again >> pricing.py");
    const inParent = await inSandbox(runner, parent, "ls; tail -1 pricing.py");
    expect(inParent.stdout).toMatch(/^parent-only\.txt$/m);
    expect(inParent.stdout).not.toMatch(/fork-only/);
    expect(inParent.stdout).toMatch(/^made$/m);
    expect(inParent.stdout).toMatch(/again\n$/);
    const inChild = await inSandbox(runner, child, "ls; tail -1 pricing.py");
    expect(inChild.stdout).toMatch(/^fork-only\.txt$/m);
    expect(inChild.stdout).not.toMatch(/parent-only/);
    expect(inChild.stdout).toMatch(/# edited\n$/);

    // The fork's diff is against the repository as seeded: its baseline is the parent's.
    const diff = await cordon("diff", "--session", child, "--stat");
    expect(diff.exitCode, diff.stderr).toBe(0);
    for (const file of ["pricing.py", "README.md", "test_pricing.py", "fork-only.txt"]) {
      expect(diff.stdout).toContain(file);
    }
    expect(diff.stdout).not.toContain("made/file.txt");
    expect(diff.stdout).not.toContain("build/out");

    // The links are in the patch as links; apply takes the rest once they are gone.
    await inSandbox(runner, child, "rm baseline-head fork-dir");
    const applied = await cordon("apply", "--session", child, "--yes");
    expect(applied.exitCode, applied.stderr).toBe(0);
    expect(await readFile(path.join(repo, "fork-only.txt"), "utf8")).toBe("fork\n");
    expect(await readFile(path.join(repo, "pricing.py"), "utf8")).toMatch(/# edited\n$/);
    await expect(lstat(path.join(repo, "README.md"))).rejects.toThrow(/ENOENT/);
    expect(((await lstat(path.join(repo, "test_pricing.py"))).mode & 0o111) !== 0).toBe(true);
    git(repo, "checkout", "-q", "--", ".");
    git(repo, "clean", "-qfd");

    // Removing the fork removes its volumes and leaves the parent's.
    const removed = await runCordon(["sandbox", "rm", forkName], env);
    expect(removed.exitCode, removed.stderr).toBe(0);
    const left = [...(await volumesOf(home)).keys()];
    expect(left.filter((name) => name.startsWith(forkName))).toEqual([]);
    expect(left.filter((name) => name.startsWith(parentName ?? "?")).length).toBe(3);
  }, 300_000);

  it("a fork onto a session with volumes is refused and leaves them; a failed fork leaves no volume", async () => {
    const parent = sessionOf("p2");
    const taken = sessionOf("taken");
    await using runner = runnerOf();
    await inSandbox(runner, parent, "echo one > one.txt");
    await inSandbox(runner, taken, "echo mine > mine.txt");
    await expect(runner.forkSandbox({ sessionKey: parent, as: taken })).rejects.toThrow(
      /exists already/,
    );
    expect((await inSandbox(runner, taken, "cat mine.txt; ls one.txt")).stdout).toBe("mine\n");

    await inSandbox(runner, parent, "echo secret > locked.txt && chmod 000 locked.txt");
    const failed = sessionOf("failed");
    await expect(runner.forkSandbox({ sessionKey: parent, as: failed })).rejects.toThrow(
      /cannot fork .*locked\.txt/s,
    );
    const name = (await runner.plan({ sessionKey: failed })).sandbox.spec?.containerName ?? "";
    expect(name).not.toBe("");
    expect([...(await volumesOf(home)).keys()].filter((v) => v.startsWith(name))).toEqual([]);
  }, 300_000);
});
