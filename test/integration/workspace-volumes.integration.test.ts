/**
 * A private copy that lives with the engine (`sandbox.workspaceStorage: "volume"`), on the local
 * engine: a scripted `cordon run` works in a copy seeded into a Docker volume, `diff`, `apply`,
 * `checkpoint` and `rollback` go through inspectors mounting the volumes, `sandbox rm` keeps
 * unapplied work and then removes the volumes — and no host path of the copy is ever made.
 */
import {
  chmod,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  rm,
  symlink,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  DockerEngine,
  SandboxInventory,
  baselineGitDir,
  privateWorkspacePath,
  type SandboxSummary,
} from "../../src/sandbox/index.js";
import { demoRepo, example, git } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

const suffix = `${process.pid}-${Date.now().toString(36)}`;

const exists = (file: string): Promise<boolean> =>
  lstat(file).then(
    () => true,
    () => false,
  );

/** The volumes of `home`'s copies, by name, with their labels. */
async function volumesOf(home: string): Promise<Map<string, Record<string, string>>> {
  const listed = await dockerClient().listVolumes({
    filters: { label: [`cordon.home=${home}`] },
  });
  return new Map((listed.Volumes ?? []).map((v) => [v.Name, v.Labels ?? {}]));
}

describe("a private copy in volumes on the engine", () => {
  let root: string;
  let home: string;
  let repo: string;
  const env = (): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: path.join(root, "cordon.json5"),
    ANTHROPIC_API_KEY: "",
    ANTHROPIC_BASE_URL: "",
  });
  const cordon = (args: string[]) => runCordon(args, env());
  const session = `vol-${suffix}`;

  async function sandboxOf(key: string): Promise<SandboxSummary> {
    const listed = await cordon(["sandbox", "list", "--json"]);
    const all = (JSON.parse(listed.stdout) as { sandboxes: SandboxSummary[] }).sandboxes;
    const found = all.find((sandbox) => sandbox.session === `agent:main:${key}`);
    if (!found) throw new Error(`no sandbox of ${key} in ${listed.stdout}`);
    return found;
  }

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-volumes-"));
    home = path.join(root, "home");
    await writeFile(
      path.join(root, "cordon.json5"),
      '{ agents: { defaults: { sandbox: { workspaceStorage: "volume" } } } }\n',
    );
    repo = await demoRepo();
  });

  afterAll(async () => {
    await cordon(["sandbox", "rm", "--all", "--discard-changes"]);
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("explain names the storage", async () => {
    const explained = await cordon([
      "sandbox",
      "explain",
      "--workspace",
      repo,
      "--session",
      session,
    ]);
    expect(explained.exitCode, explained.stderr).toBe(0);
    expect(explained.stdout).toMatch(/storage +Docker volumes on the engine/);
  });

  it("a scripted run fixes the test in a volume; diff, checkpoint, rollback, apply; rm removes the volumes", async () => {
    const run = await cordon([
      "run",
      "--workspace",
      repo,
      "--session",
      session,
      "--model-script",
      example("demo", "script.json"),
      "--output-format",
      "json",
      "Fix the failing test.",
    ]);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ status: "completed" });
    expect(git(repo, "status", "--porcelain")).toBe("");

    const sandbox = await sandboxOf(session);
    // Nothing of the copy on this host: no directory at its path, only cordon's records beside it.
    const hostPath = privateWorkspacePath(home, sandbox.name);
    expect(await exists(hostPath)).toBe(false);
    const volumes = await volumesOf(home);
    expect([...volumes.keys()].sort()).toEqual(
      ["baseline", "checkpoints", "workspace"].map((role) => `${sandbox.name}-${role}`),
    );
    expect(volumes.get(`${sandbox.name}-workspace`)).toMatchObject({
      "cordon.volume-of": sandbox.name,
      "cordon.volume-role": "workspace",
    });
    const mounts = (await dockerClient().getContainer(sandbox.name).inspect()).Mounts;
    expect(mounts.find((m) => m.Destination === "/workspace")).toMatchObject({
      Type: "volume",
      Name: `${sandbox.name}-workspace`,
    });

    const diff = await cordon(["diff", "--workspace", repo, "--session", session]);
    expect(diff.exitCode, diff.stderr).toBe(0);
    expect(diff.stdout).toContain("-    return subtotal + discount");
    expect(diff.stdout).toContain("+    return subtotal - discount");

    // A checkpoint, a change after it, a rollback: the change is gone, the fix stays.
    const made = await cordon(["checkpoint", "fixed", "--workspace", repo, "--session", session]);
    expect(made.exitCode, made.stderr).toBe(0);
    const scribble = await cordon([
      "exec",
      "--workspace",
      repo,
      "--session",
      session,
      "--",
      "sh",
      "-c",
      "echo scribble > scribble.txt",
    ]);
    expect(scribble.exitCode, scribble.stderr).toBe(0);
    const rolled = await cordon(["rollback", "fixed", "--workspace", repo, "--session", session]);
    expect(rolled.exitCode, rolled.stderr).toBe(0);
    const after = await cordon(["diff", "--workspace", repo, "--session", session]);
    expect(after.stdout).not.toContain("scribble");
    expect(after.stdout).toContain("+    return subtotal - discount");

    // Unapplied work is read over the volumes too: rm keeps it.
    const refused = await cordon(["sandbox", "rm", sandbox.name]);
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toMatch(/changed file/);
    expect((await volumesOf(home)).size).toBe(3);

    const apply = await cordon(["apply", "--workspace", repo, "--session", session, "--yes"]);
    expect(apply.exitCode, apply.stderr).toBe(0);
    expect(await readFile(path.join(repo, "pricing.py"), "utf8")).toContain("subtotal - discount");

    const removed = await cordon(["sandbox", "rm", sandbox.name]);
    expect(removed.exitCode, removed.stderr).toBe(0);
    expect((await volumesOf(home)).size).toBe(0);
    expect(await exists(hostPath)).toBe(false);
  });

  it("a hostile repository in a volume: links out and a .git file pointing elsewhere reach nothing outside it", async () => {
    const hostile = path.join(root, "hostile");
    const outside = path.join(root, "outside");
    const victim = path.join(root, "victim.git");
    await mkdir(outside);
    await writeFile(path.join(outside, "canary.txt"), "untouched\n");
    git(root, "init", "-q", "--bare", victim);
    await mkdir(path.join(hostile, "vendor", "lib"), { recursive: true });
    await writeFile(path.join(hostile, "README.md"), "# shop\n");
    await symlink(outside, path.join(hostile, "out"));
    await symlink("../../outside", path.join(hostile, "vendor", "up"));
    await writeFile(path.join(hostile, "vendor", "lib", "index.js"), "module.exports = 1;\n");
    git(hostile, "init", "-q");
    git(hostile, "add", "-A");
    git(hostile, "commit", "-qm", "init");
    // A nested checkout whose .git is a file naming a git dir outside the repository.
    await writeFile(path.join(hostile, "vendor", "lib", ".git"), `gitdir: ${victim}\n`);
    const key = `hostile-${suffix}`;
    const inSandbox = (line: string) =>
      cordon(["exec", "--workspace", hostile, "--session", key, "--", "sh", "-c", line]);
    // The agent writes through the links (they resolve inside the sandbox) and re-aims them.
    const agent = await inSandbox(
      "echo owned > out/canary.txt 2>/dev/null; echo owned > vendor/up/canary.txt 2>/dev/null; " +
        "rm out && ln -s /etc out; printf 'gitdir: /root/.git\\n' > vendor/lib/.git; " +
        "echo change >> README.md; true",
    );
    expect(agent.exitCode, agent.stderr).toBe(0);
    const sandbox = await sandboxOf(key);
    // No host path of the copy exists: no host program can run over it.
    expect(await exists(privateWorkspacePath(home, sandbox.name))).toBe(false);

    const diff = await cordon(["diff", "--workspace", hostile, "--session", key]);
    expect(diff.exitCode, diff.stderr).toBe(0);
    expect(diff.stdout).toContain("+change");
    const apply = await cordon(["apply", "--workspace", hostile, "--session", key, "--yes"]);
    // The re-aimed link leaves the repository: refused whole (exit 7), nothing written.
    expect(apply.exitCode).toBe(7);
    expect(apply.stderr).toMatch(/out -> \/etc/);
    expect(await readFile(path.join(hostile, "README.md"), "utf8")).toBe("# shop\n");
    expect(await readFile(path.join(outside, "canary.txt"), "utf8")).toBe("untouched\n");
    expect(await readdir(outside)).toEqual(["canary.txt"]);
    expect(await readFile(path.join(hostile, "vendor", "lib", ".git"), "utf8")).toBe(
      `gitdir: ${victim}\n`,
    );
    expect(git(victim, "count-objects")).toMatch(/^0 objects/);
  });

  it("sandbox rm removes a seeding container still holding the volumes (its removal runs after the sandbox started)", async () => {
    const key = `seed-left-${suffix}`;
    const made = await cordon(["exec", "--workspace", repo, "--session", key, "--", "true"]);
    expect(made.exitCode, made.stderr).toBe(0);
    const sandbox = await sandboxOf(key);
    // As a process that was stopped before its background removal ran leaves it: created,
    // never started, labelled as the sandbox's, mounting all three volumes.
    const docker = dockerClient();
    const volumes = ["workspace", "baseline", "checkpoints"].map((r) => `${sandbox.name}-${r}`);
    const leftover = await docker.createContainer({
      name: `${sandbox.name}-seed-left`,
      Image: await requireSandboxImage(),
      Entrypoint: ["true"],
      Labels: { "cordon.inspector": sandbox.name, "cordon.home": home },
      HostConfig: {
        NetworkMode: "none",
        Mounts: volumes.map((volume, index) => ({
          Type: "volume" as const,
          Source: volume,
          Target: `/seed/${index}`,
        })),
      },
    });
    try {
      const removed = await cordon(["sandbox", "rm", sandbox.name]);
      expect(removed.exitCode, removed.stderr).toBe(0);
      const left = [...(await volumesOf(home)).keys()].filter((v) => v.startsWith(sandbox.name));
      expect(left).toEqual([]);
      await expect(leftover.inspect()).rejects.toMatchObject({ statusCode: 404 });
    } finally {
      await leftover.remove({ force: true }).catch(() => undefined);
    }
  });
});

describe("a copy seeded into volumes (streamed from the repository) and one on this host", () => {
  let root: string;
  let home: string;
  let repo: string;
  const configs = { volume: "", host: "" };
  const cordon = (storage: "volume" | "host", ...args: string[]) =>
    runCordon(args, { CORDON_HOME: home, CORDON_CONFIG: configs[storage], ANTHROPIC_API_KEY: "" });
  const session = (storage: "volume" | "host") => `same-${storage}-${suffix}`;
  const inSandbox = (storage: "volume" | "host", script: string) =>
    cordon(
      storage,
      "exec",
      "--workspace",
      repo,
      "--session",
      session(storage),
      "--",
      "sh",
      "-c",
      script,
    );

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-volume-same-"));
    home = path.join(root, "home");
    for (const storage of ["volume", "host"] as const) {
      configs[storage] = path.join(root, `${storage}.json5`);
      await writeFile(
        configs[storage],
        `{ agents: { defaults: { sandbox: { workspaceStorage: "${storage}" } } } }\n`,
      );
    }
    repo = path.join(root, "repo");
    const write = async (relative: string, content: string): Promise<void> => {
      await mkdir(path.dirname(path.join(repo, relative)), { recursive: true });
      await writeFile(path.join(repo, relative), content);
    };
    await mkdir(repo);
    git(repo, "init", "-q");
    await write(".gitignore", "build/\n*.log\n!keep.log\n");
    await write("src/app/main.py", "print('main')\n");
    await write("src/app/deep/er/util.py", "x = 1\n");
    await write("run.sh", "#!/bin/sh\necho run\n");
    await chmod(path.join(repo, "run.sh"), 0o755);
    await symlink("src/app/main.py", path.join(repo, "main-link"));
    // Large enough to stream into the tar in pieces rather than be read whole.
    await write("assets/large.bin", "0123456789abcdef".repeat(600 * 1024));
    await write("build/forced.txt", "tracked, yet ignored\n");
    git(repo, "add", "-A");
    git(repo, "add", "-f", "build/forced.txt");
    git(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "init");
    await write("src/app/main.py", "print('edited, not committed')\n");
    await write("untracked.txt", "untracked\n");
    await write("keep.log", "kept by a negation\n");
    await write("debug.log", "ignored\n");
    await write("build/out.js", "ignored\n");
    await write(".env", "SECRET=1\n");
  });

  afterAll(async () => {
    for (const storage of ["volume", "host"] as const) {
      await cordon(storage, "sandbox", "rm", "--all", "--discard-changes").catch(() => undefined);
    }
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
  });

  it("hold the same files, modes, links and times, and diff the same changes the same way", async () => {
    // Everything but .git (its copy is the same code both ways): type, mode, link, time, bytes.
    const listing =
      "find . -path ./.git -prune -o -print | sort | while IFS= read -r p; do " +
      'if [ -L "$p" ]; then echo "l $p $(readlink "$p")"; ' +
      'elif [ -d "$p" ]; then echo "d $(stat -c %a "$p") $p"; ' +
      'else echo "f $(stat -c "%a %Y" "$p") $p $(sha256sum < "$p" | cut -c1-16)"; fi; done';
    const listed = { volume: "", host: "" };
    for (const storage of ["volume", "host"] as const) {
      const result = await inSandbox(storage, listing);
      expect(result.exitCode, result.stderr).toBe(0);
      listed[storage] = result.stdout;
    }
    expect(listed.volume).toBe(listed.host);
    expect(listed.volume).toMatch(/^f 755 \d+ \.\/run\.sh /m);
    expect(listed.volume).toContain("l ./main-link src/app/main.py\n");
    expect(listed.volume).toContain("d 755 ./src/app/deep/er\n");
    expect(listed.volume).toContain("./build/forced.txt");
    expect(listed.volume).toMatch(/^f 644 \d+ \.\/assets\/large\.bin /m);
    expect(listed.volume).toContain("./keep.log");
    expect(listed.volume).not.toContain("./debug.log");
    expect(listed.volume).not.toContain("./.env");

    // The same changes: the baseline of each decides what the diff shows (the tracked-yet-ignored
    // file's edit is not in it; the untracked file's and the negated log's are).
    const change =
      "echo more >> untracked.txt && echo more >> keep.log && echo more >> build/forced.txt && " +
      "chmod 644 run.sh && rm main-link && echo new > src/app/deep/new.py";
    const diffs = { volume: "", host: "" };
    for (const storage of ["volume", "host"] as const) {
      expect((await inSandbox(storage, change)).exitCode).toBe(0);
      const diff = await cordon(
        storage,
        "diff",
        "--workspace",
        repo,
        "--session",
        session(storage),
      );
      expect(diff.exitCode, diff.stderr).toBe(0);
      diffs[storage] = diff.stdout;
    }
    expect(diffs.volume).toBe(diffs.host);
    expect(diffs.volume).toContain("diff --git a/keep.log b/keep.log");
    expect(diffs.volume).toContain("old mode 100755");
    expect(diffs.volume).toContain("deleted file mode 120000");
    expect(diffs.volume).not.toContain("build/forced.txt");
  });
});

describe("sandbox.disk on a copy in volumes (watched: no driver bounds a volume on disk)", () => {
  let root: string;
  let home: string;
  let repo: string;
  let config: string;
  const session = `vol-disk-${suffix}`;
  const cordon = (...args: string[]) =>
    runCordon(args, { CORDON_HOME: home, CORDON_CONFIG: config, ANTHROPIC_API_KEY: "" });
  const inSandbox = (script: string) =>
    cordon("exec", "--workspace", repo, "--session", session, "--", "sh", "-c", script);

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-volume-disk-"));
    home = path.join(root, "home");
    config = path.join(root, "cordon.json5");
    await writeFile(
      config,
      '{ agents: { defaults: { sandbox: { workspaceStorage: "volume", disk: "64m" } } } }\n',
    );
    repo = await demoRepo();
  });

  afterAll(async () => {
    await cordon("sandbox", "rm", "--all", "--discard-changes").catch(() => undefined);
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("explain says watched, not ext4; a sandbox that writes past it (hidden in a directory it made unreadable) is stopped, and none starts on it again", async () => {
    const explained = await cordon("sandbox", "explain", "--workspace", repo, "--session", session);
    expect(explained.stdout).toMatch(/disk +64 MiB for the private workspace \(watched/);
    expect(explained.stdout).not.toMatch(/ext4/);

    // The agent fills its copy, hides the bytes behind a directory no one but root may read, and
    // keeps running: the watchdog (every 10 s) still counts them and stops it. That "survived"
    // never prints is the proof it was stopped, not a clock.
    const filled = await inSandbox(
      "mkdir hide && dd if=/dev/zero of=hide/fill bs=1M count=100 2>/dev/null && chmod 000 hide; sleep 60; echo survived",
    );
    expect(filled.stdout).not.toContain("survived");
    expect(filled.exitCode).toBe(3);
    expect(filled.stderr).toMatch(
      /the sandbox wrote 1\d\d MiB to its private workspace \(the Docker volume \S+-workspace\), more than sandbox\.disk allows \(64 MiB\); cordon stopped it, because the engine cannot bound a volume on disk/,
    );

    const again = await inSandbox("echo started");
    expect(again.exitCode).toBe(3);
    expect(again.stdout).not.toContain("started");
    expect(again.stderr).toMatch(/more than sandbox\.disk allows \(64 MiB\)/);
    expect(again.stderr).toMatch(/cordon sandbox rm/);
    // Nothing of the measuring containers is left.
    const left = await dockerClient().listContainers({
      all: true,
      filters: { label: [`cordon.home=${home}`] },
    });
    expect(left.map((c) => c.Names[0] ?? "").filter((n) => n.includes("-du-"))).toEqual([]);
  });
});

describe("prune and copies in volumes whose sandbox is gone", () => {
  let root: string;
  let home: string;
  let repo: string;
  let config: string;
  const cordon = (...args: string[]) =>
    runCordon(args, { CORDON_HOME: home, CORDON_CONFIG: config, ANTHROPIC_API_KEY: "" });

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-volume-prune-"));
    home = path.join(root, "home");
    config = path.join(root, "cordon.json5");
    await writeFile(
      config,
      '{ agents: { defaults: { sandbox: { workspaceStorage: "volume" } } } }\n',
    );
    repo = await demoRepo();
  });

  afterAll(async () => {
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

  it("removes the volumes of a copy with nothing to lose, keeps one with unapplied work (even with cordon's records on this host gone) until told to discard it", async () => {
    const image = await requireSandboxImage();
    const worked = `prune-work-${suffix}`;
    const idle = `prune-idle-${suffix}`;
    const inSandbox = (session: string, line: string) =>
      cordon("exec", "--workspace", repo, "--session", session, "--", "sh", "-c", line);
    expect((await inSandbox(worked, "echo work > work.txt")).exitCode).toBe(0);
    expect((await inSandbox(idle, "true")).exitCode).toBe(0);
    // The sandboxes vanish behind cordon's back: containers and records gone, and for one of
    // them cordon's records of its copy on this host too. Only the volumes are left.
    const sandboxes = [
      ...new Set([...(await volumesOf(home)).values()].map((l) => l["cordon.volume-of"] ?? "")),
    ];
    expect(sandboxes).toHaveLength(2);
    for (const name of sandboxes) {
      await dockerClient().getContainer(name).remove({ force: true });
      await rm(path.join(home, "sandboxes", `${name}.json`), { force: true });
    }
    const inventory = new SandboxInventory({
      engine: DockerEngine.fromEnv(process.env),
      stateDirectory: home,
      image,
    });
    const withWork = sandboxes.find((name) => name.includes("prune-work")) ?? "";
    const clean = sandboxes.find((name) => name.includes("prune-idle")) ?? "";
    expect([withWork, clean].every(Boolean), sandboxes.join(" ")).toBe(true);
    // Listed, though nothing of them is on this host: `sandbox list` names the volumes.
    const inVolumes = (await inventory.orphans()).filter((o) => o.volumes);
    expect(inVolumes.map((o) => [o.path, o.sandbox])).toEqual(
      [withWork, clean].sort().map((name) => [`${name}-workspace`, name]),
    );
    const listed = await cordon("sandbox", "list");
    expect(listed.stderr).toContain(
      `orphaned workspace ${withWork}-workspace of ${withWork}: Docker volumes on the engine`,
    );
    const pruned = await inventory.prune({ orphanMinAgeMs: 0 });
    expect(pruned.keptForChanges.map((kept) => [kept.name, kept.reason])).toEqual([
      [
        withWork,
        expect.stringMatching(/whose sandbox is gone; it holds 1 changed file never applied/),
      ],
    ]);
    expect(pruned.orphans.map((orphan) => orphan.path)).toContain(`${clean}-workspace`);
    const kept = ["baseline", "checkpoints", "workspace"].map((r) => `${withWork}-${r}`);
    expect([...(await volumesOf(home)).keys()].sort()).toEqual(kept);

    // cordon's records of the copy on this host gone too: it cannot be read, and is still kept.
    const workspace = privateWorkspacePath(home, withWork);
    await rm(baselineGitDir(workspace), { recursive: true, force: true });
    const unread = await inventory.prune({ orphanMinAgeMs: 0 });
    expect(unread.keptForChanges.map((k) => k.reason)).toEqual([
      expect.stringMatching(/cannot tell whether it holds unapplied changes/),
    ]);
    expect([...(await volumesOf(home)).keys()].sort()).toEqual(kept);

    const discarded = await inventory.prune({ orphanMinAgeMs: 0, discardChanges: true });
    expect(discarded.orphans.map((o) => o.path)).toContain(`${withWork}-workspace`);
    expect((await volumesOf(home)).size).toBe(0);
  });
});
