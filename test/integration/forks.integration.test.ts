/**
 * Forks against the real engine (docs/checkpoints.md, "Forks"): a fork sees its parent's changes
 * — a file edited, one a shell command created, one deleted, a chmod — and after the fork each
 * changes alone; the fork's diff shows every change since the repository and `cordon apply` from
 * it writes the real repository. A name that exists is refused and left alone; a fork that fails
 * midway leaves no container and no copy; `--count` failing part-way removes the forks it made,
 * but not one a run has started on meanwhile. With a warm pool, a fork is served by a waiting
 * member, whose seed is replaced by the parent's state.
 */
import { lstat, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { ForkTargetExistsError, createRunner, type Runner } from "../../src/index.js";
import { createSilentLogger } from "../../src/common/index.js";
import {
  acquireSessionLock,
  defaultSandboxes,
  forkKeptPhase,
  forkSession,
  type SandboxProvider,
} from "../../src/runner/index.js";
import {
  DockerEngine,
  baselineGitDir,
  diskImagePath,
  overrideDiskBudgetSupport,
} from "../../src/sandbox/index.js";
import { demoRepo, git } from "../support/demo-repo.js";
import { dockerClient, removeContainersOfHome, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

const sessionOf = (name: string): string => `fk-${name}-${process.pid}-${Date.now().toString(36)}`;

describe("forks", () => {
  let home: string;
  let repo: string;
  let env: NodeJS.ProcessEnv;
  const runnerOf = (): Runner => createRunner({ cwd: repo, workspace: repo, env, onClose: "keep" });
  const cordon = (command: string, ...args: string[]) =>
    runCordon([command, "--workspace", repo, ...args], { ...env, CORDON_LOG_LEVEL: "silent" });
  /** Runs `command` in the session's sandbox, as the agent would. */
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
    home = await mkdtemp(path.join(tmpdir(), "cordon-forks-home-"));
    repo = await demoRepo();
    env = { ...process.env, CORDON_HOME: home, CORDON_CONFIG: "", ANTHROPIC_API_KEY: "" };
  });

  afterAll(async () => {
    await removeContainersOfHome(home);
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("a fork sees its parent's edits, creations, deletions and modes, then each changes alone; its diff and apply reach the repository", async () => {
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
        // Ignored by the copy's own rules, so in no diff, but part of the state a fork starts from.
        "echo 'build/' > .gitignore && mkdir -p build && echo out > build/out",
      ].join(" && "),
    );

    const forked = await runner.forkSandbox({ sessionKey: parent, as: child });
    try {
      expect(forked.plan.sessionKey).toMatch(new RegExp(`:${child}$`));
      const seen = await forked.lease.sandbox.exec(
        "tail -1 pricing.py; cat made/file.txt; ls README.md; stat -c %a test_pricing.py; cat build/out; whoami",
      );
      expect(seen.stdout).toMatch(/^# edited\nnew\n/);
      expect(seen.stdout).toMatch(/\n755\nout\n/);
      expect(seen.stderr).toMatch(/README\.md/);
      // A container of its own.
      expect(forked.plan.sandbox.spec?.containerName).not.toBe(
        (await runner.plan({ sessionKey: parent })).sandbox.spec?.containerName,
      );
      await forked.lease.sandbox.exec("echo fork > fork-only.txt && rm made/file.txt");
    } finally {
      await forked.lease.release();
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

    // The fork's diff is against the repository as seeded: every change since, the parent's too.
    const diff = await cordon("diff", "--session", child, "--stat");
    expect(diff.exitCode, diff.stderr).toBe(0);
    for (const file of ["pricing.py", "README.md", "test_pricing.py", "fork-only.txt"]) {
      expect(diff.stdout).toContain(file);
    }
    expect(diff.stdout).not.toContain("made/file.txt");
    expect(diff.stdout).not.toContain("build/out");

    const applied = await cordon("apply", "--session", child);
    expect(applied.exitCode, applied.stderr).toBe(0);
    expect(await readFile(path.join(repo, "fork-only.txt"), "utf8")).toBe("fork\n");
    expect(await readFile(path.join(repo, "pricing.py"), "utf8")).toMatch(/# edited\n$/);
    await expect(lstat(path.join(repo, "README.md"))).rejects.toThrow(/ENOENT/);
    expect(((await lstat(path.join(repo, "test_pricing.py"))).mode & 0o111) !== 0).toBe(true);
    git(repo, "checkout", "-q", "--", ".");
    git(repo, "clean", "-qfd");
  }, 300_000);

  it("refuses a fork onto a session that has a sandbox (nothing of it touched), and a failed fork leaves nothing behind", async () => {
    const parent = sessionOf("p2");
    const taken = sessionOf("taken");
    await using runner = runnerOf();
    await inSandbox(runner, parent, "echo one > one.txt");
    await inSandbox(runner, taken, "echo mine > mine.txt");
    await expect(runner.forkSandbox({ sessionKey: parent, as: taken })).rejects.toBeInstanceOf(
      ForkTargetExistsError,
    );
    expect((await inSandbox(runner, taken, "cat mine.txt; ls one.txt")).stdout).toBe("mine\n");

    const itself = await cordon("fork", "--session", parent, "--as", parent);
    expect(itself.exitCode).toBe(2);
    expect(itself.stderr).toMatch(
      /cannot fork session \S+ into itself\n {2}fix: name a new session/,
    );

    for (const hostile of ["../escape", "--upload-pack=x", "with space", "refs/heads/x", "a..b"]) {
      await expect(runner.forkSandbox({ sessionKey: parent, as: hostile })).rejects.toThrow(
        /cannot name a fork/,
      );
    }

    // A file the sandbox user cannot read stops the copy: the fork says which, and is gone.
    await inSandbox(runner, parent, "echo secret > locked.txt && chmod 000 locked.txt");
    const failed = sessionOf("failed");
    await expect(runner.forkSandbox({ sessionKey: parent, as: failed })).rejects.toThrow(
      /cannot fork .*locked\.txt/s,
    );
    const plan = await runner.plan({ sessionKey: failed });
    const spec = plan.sandbox.spec;
    expect(spec?.privateWorkspace).toBeDefined();
    await expect(
      dockerClient()
        .getContainer(spec?.containerName ?? "")
        .inspect(),
    ).rejects.toThrow(/no such container/i);
    for (const leftover of [
      spec?.privateWorkspace ?? "",
      baselineGitDir(spec?.privateWorkspace ?? ""),
    ]) {
      await expect(lstat(leftover), leftover).rejects.toThrow(/ENOENT/);
    }
  }, 300_000);

  it("`cordon fork --count` makes <name>-1 … <name>-N; an existing name or a hostile one is exit 2, a session a run holds exit 3 naming it", async () => {
    const parent = sessionOf("cli");
    const stem = sessionOf("try");
    await using runner = runnerOf();
    await inSandbox(runner, parent, "echo shared > shared.txt");

    const made = await cordon("fork", "--session", parent, "--as", stem, "--count", "2", "--json");
    expect(made.exitCode, made.stderr).toBe(0);
    const { forks } = JSON.parse(made.stdout) as {
      forks: { name: string; sessionKey: string; sandbox: string }[];
    };
    expect(forks.map((fork) => fork.name)).toEqual([`${stem}-1`, `${stem}-2`]);
    expect(new Set(forks.map((fork) => fork.sandbox)).size).toBe(2);
    await inSandbox(runner, `${stem}-1`, "echo one >> shared.txt");
    expect((await inSandbox(runner, `${stem}-2`, "cat shared.txt")).stdout).toBe("shared\n");
    const diff = await cordon("diff", "--session", `${stem}-2`, "--stat");
    expect(diff.stdout).toContain("shared.txt");

    const again = await cordon("fork", "--session", parent, "--as", `${stem}-1`);
    expect(again.exitCode).toBe(2);
    expect(again.stderr).toMatch(/exists already/);
    // The existing fork keeps its work.
    expect((await inSandbox(runner, `${stem}-1`, "cat shared.txt")).stdout).toBe("shared\none\n");

    for (const hostile of ["../escape", "--upload-pack=x", "with space", "refs/heads/x"]) {
      const refused = await cordon("fork", "--session", parent, `--as=${hostile}`);
      expect(refused.exitCode, hostile).toBe(2);
      expect(refused.stderr).toMatch(/cannot name a fork/);
    }
    const tooMany = await cordon("fork", "--session", parent, "--as", "x", "--count", "99");
    expect(tooMany.exitCode).toBe(2);

    const plan = await runner.plan({ sessionKey: parent });
    const lock = await acquireSessionLock({
      stateDir: home,
      sessionKey: plan.sessionKey,
      project: plan.agent.workspaceId,
      runId: "run-that-holds-it",
    });
    try {
      const busy = await cordon("fork", "--session", parent, "--as", sessionOf("late"));
      expect(busy.exitCode).toBe(3);
      expect(busy.stderr).toMatch(/cannot fork session .*run-that-holds-it/s);
    } finally {
      await lock.release();
    }
  }, 300_000);

  it("forks a plain-directory copy (where disk images cannot be mounted) as it forks one in an image", async () => {
    overrideDiskBudgetSupport({ enforced: false, reason: "a test without mounts", fix: "none" });
    try {
      const parent = sessionOf("plain");
      const child = sessionOf("plain-child");
      await using runner = runnerOf();
      await inSandbox(runner, parent, "echo plain > plain.txt && chmod 600 plain.txt");
      const forked = await runner.forkSandbox({ sessionKey: parent, as: child });
      try {
        const workspace = forked.lease.privateWorkspace ?? "";
        await expect(lstat(diskImagePath(workspace))).rejects.toThrow(/ENOENT/);
        const seen = await forked.lease.sandbox.exec("cat plain.txt; stat -c %a plain.txt");
        expect(seen.stdout).toBe("plain\n600\n");
      } finally {
        await forked.lease.release();
      }
    } finally {
      overrideDiskBudgetSupport(undefined);
    }
  }, 300_000);

  it("`fork --count` failing part-way removes the forks it made, but keeps (and names) one a run started on meanwhile", async () => {
    const parent = sessionOf("undo");
    const stem = sessionOf("u");
    await using runner = runnerOf();
    await inSandbox(runner, parent, "echo base > base.txt");
    // The third fork's name has a sandbox of its own: the command fails there, two forks made.
    await inSandbox(runner, `${stem}-3`, "echo mine > mine.txt");
    const provider = defaultSandboxes({
      engine: DockerEngine.fromEnv(env),
      stateDir: home,
      logger: createSilentLogger(),
    });
    const fork = provider.fork?.bind(provider);
    if (!fork) throw new Error("the Docker backend forks");
    let forks = 0;
    let runOnFirst: { release: () => Promise<void> } | undefined;
    const planOf = async (name: string) => runner.plan({ sessionKey: name });
    const sandboxes: SandboxProvider = {
      ...provider,
      fork: async (source, target, options) => {
        forks += 1;
        if (forks === 3) {
          // A run starts on the first fork (its session's lock, as `cordon run` holds it) while
          // the third is being made.
          const first = await planOf(`${stem}-1`);
          runOnFirst = await acquireSessionLock({
            stateDir: home,
            sessionKey: first.sessionKey,
            project: first.agent.workspaceId,
            runId: "run-on-fork-1",
          });
        }
        return fork(source, target, options);
      },
    };
    const warnings: string[] = [];
    try {
      await expect(
        forkSession(
          { plan: (request) => runner.plan(request), sandboxes, stateDir: home },
          {
            sessionKey: parent,
            as: stem,
            count: 3,
            onProgress: (progress) => {
              if (progress.phase === forkKeptPhase) warnings.push(progress.message);
            },
          },
        ),
      ).rejects.toBeInstanceOf(ForkTargetExistsError);
      expect(forks).toBe(3);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(
        new RegExp(`fork ${stem}-1 was kept, not removed: .*run-on-fork-1.*cordon sandbox rm`),
      );
      const [first, second, third] = await Promise.all(
        [1, 2, 3].map(async (n) => (await planOf(`${stem}-${n}`)).sandbox.spec),
      );
      // The fork in use keeps its container and its copy, with the parent's state.
      await dockerClient()
        .getContainer(first?.containerName ?? "")
        .inspect();
      expect(await readFile(path.join(first?.privateWorkspace ?? "", "base.txt"), "utf8")).toBe(
        "base\n",
      );
      // The other fork it made is gone, container and copy.
      await expect(
        dockerClient()
          .getContainer(second?.containerName ?? "")
          .inspect(),
      ).rejects.toThrow(/no such container/i);
      await expect(lstat(second?.privateWorkspace ?? "")).rejects.toThrow(/ENOENT/);
      // The sandbox that was there first is untouched.
      expect(await readFile(path.join(third?.privateWorkspace ?? "", "mine.txt"), "utf8")).toBe(
        "mine\n",
      );
    } finally {
      await runOnFirst?.release();
    }
  }, 300_000);

  it("with a warm pool a fork takes a waiting member: its container, the parent's state in place of the member's seed, independent after", async () => {
    const config = path.join(home, "pool.json5");
    await writeFile(config, "{ agents: { defaults: { sandbox: { pool: { size: 1 } } } } }\n");
    const poolEnv = { ...env, CORDON_CONFIG: config };
    const pooled = (): Runner =>
      createRunner({ cwd: repo, workspace: repo, env: poolEnv, onClose: "keep" });
    const parent = sessionOf("pooled");
    const child = sessionOf("pooled-child");
    {
      // The parent's acquire fills the pool (one member, seeded from the repository as it is);
      // closing the runner waits for that refill.
      await using runner = pooled();
      await inSandbox(
        runner,
        parent,
        "echo parent > parent.txt && rm README.md && echo '# edited' >> pricing.py",
      );
    }
    const members = async (): Promise<string[]> =>
      (
        await dockerClient().listContainers({
          filters: { label: [`cordon.home=${home}`, "cordon.pool"], status: ["running"] },
        })
      )
        .filter((info) => (info.Names[0] ?? "").includes("-pool-"))
        .map((info) => info.Id);
    const waiting = await members();
    expect(waiting).toHaveLength(1);

    await using runner = pooled();
    const progress: string[] = [];
    const forked = await runner.forkSandbox({
      sessionKey: parent,
      as: child,
      onProgress: (event) => progress.push(event.message),
    });
    try {
      expect(progress.join("\n")).toMatch(/took a container from the warm pool/);
      const name = forked.plan.sandbox.spec?.containerName ?? "";
      // The member's own container, renamed to the fork's.
      const container = await dockerClient().getContainer(name).inspect();
      expect(container.Id).toBe(waiting[0]);
      // The parent's state, not the member's seed: README.md (which the seed has) is gone.
      const seen = await forked.lease.sandbox.exec(
        "cat parent.txt; tail -1 pricing.py; ls README.md",
      );
      expect(seen.stdout).toBe("parent\n# edited\n");
      expect(seen.stderr).toMatch(/README\.md/);
      await forked.lease.sandbox.exec("echo fork > fork-only.txt && rm parent.txt");
    } finally {
      await forked.lease.release();
    }
    await inSandbox(runner, parent, "echo again > parent-only.txt");
    expect((await inSandbox(runner, parent, "ls fork-only.txt; cat parent.txt")).stdout).toBe(
      "parent\n",
    );
    expect((await inSandbox(runner, child, "cat fork-only.txt; ls parent-only.txt")).stdout).toBe(
      "fork\n",
    );
    // Its diff is against the repository, the parent's changes with its own.
    const diff = await runCordon(["diff", "--workspace", repo, "--session", child, "--stat"], {
      ...poolEnv,
      CORDON_LOG_LEVEL: "silent",
    });
    expect(diff.exitCode, diff.stderr).toBe(0);
    for (const file of ["README.md", "pricing.py", "fork-only.txt"]) {
      expect(diff.stdout).toContain(file);
    }
    expect(diff.stdout).not.toContain("parent.txt");
  }, 300_000);
});
