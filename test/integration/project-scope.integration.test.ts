/**
 * Projects do not collide, and `rw` mode does not hand the agent the user's `.git` — mounted as
 * attacks on real containers through the CLI: two repositories using the same `--session main`
 * under one CORDON_HOME, and an agent in `rw` mode planting a hook, rewriting `.git/config`,
 * moving `.git` away, re-pointing a worktree's `.git` file, or reaching a secret through a
 * symlinked `.git`.
 */
import { execFileSync } from "node:child_process";
import { chmod, lstat, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { ExitCode } from "../../src/common/index.js";
import { git } from "../support/demo-repo.js";
import { requireSandboxImage } from "../support/docker.js";
import { runCordon, type CliRun } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

/** The uid the sandbox runs as for a workspace this test owns ("auto" never picks root). */
const sandboxUid = process.getuid?.() === 0 ? 1000 : (process.getuid?.() ?? 1000);

/** A git repository named `name` under `parent`, holding file.txt with `content`. */
async function repository(parent: string, name: string, content: string): Promise<string> {
  const repo = path.join(parent, name);
  await mkdir(repo, { recursive: true });
  await writeFile(path.join(repo, "file.txt"), content);
  git(repo, "init", "-q");
  git(repo, "add", "-A");
  git(repo, "commit", "-qm", "init");
  return repo;
}

/** Gives the tree to the sandbox's uid, as a user's own project is theirs (only needed as root). */
function ownTree(dir: string): void {
  if (process.getuid?.() !== 0) return;
  execFileSync("chown", ["-R", `${sandboxUid}:${sandboxUid}`, dir]);
}

function exists(p: string): Promise<boolean> {
  return lstat(p).then(
    () => true,
    () => false,
  );
}

describe("one project, one sandbox, under one CORDON_HOME", () => {
  let root: string;
  let home: string;
  let shopA: string;
  let shopB: string;
  const env = (): NodeJS.ProcessEnv => ({ CORDON_HOME: home, CORDON_CONFIG: "" });
  /** `cordon <command> --workspace <workspace> --session main <rest>`. */
  const inProject = (workspace: string, command: string[], ...rest: string[]): Promise<CliRun> =>
    runCordon([...command, "--workspace", workspace, "--session", "main", ...rest], env());

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-projects-"));
    home = path.join(root, "home");
    // Same directory name on purpose: the project is its real path, not its name.
    shopA = await repository(path.join(root, "a"), "shop", "from project A\n");
    shopB = await repository(path.join(root, "b"), "shop", "from project B\n");
  });

  afterAll(async () => {
    await runCordon(["sandbox", "rm", "--all", "--discard-changes"], env());
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
  });

  it("gives each project its own container and seeded copy: B sees B's file only", async () => {
    const a = await runCordon(
      ["exec", "--workspace", shopA, "--session", "main", "--", "cat", "file.txt"],
      env(),
    );
    const b = await runCordon(
      ["exec", "--workspace", shopB, "--session", "main", "--", "cat", "file.txt"],
      env(),
    );
    expect(a.stdout).toBe("from project A\n");
    expect(b.stdout).toBe("from project B\n");

    const list = await runCordon(["sandbox", "list", "--json"], env());
    const sandboxes = (
      JSON.parse(list.stdout) as {
        sandboxes: {
          name: string;
          session: string;
          workspace: string;
          privateWorkspace?: string;
        }[];
      }
    ).sandboxes;
    expect(sandboxes.map((s) => s.session)).toEqual(["agent:main:main", "agent:main:main"]);
    expect(sandboxes.map((s) => s.workspace).sort()).toEqual([shopA, shopB].sort());
    const [first, second] = sandboxes;
    expect(first?.name).not.toBe(second?.name);
    expect(first?.privateWorkspace).not.toBe(second?.privateWorkspace);
    for (const sandbox of sandboxes) {
      expect(sandbox.name).toMatch(/^cordon-shop-session-agent-main-main-[0-9a-f]{12}$/);
      expect(sandbox.privateWorkspace).toBe(path.join(home, "workspaces", sandbox.name));
      const copy = await readFile(path.join(sandbox.privateWorkspace ?? "", "file.txt"), "utf8");
      expect(copy).toBe(sandbox.workspace === shopA ? "from project A\n" : "from project B\n");
    }
    const text = await runCordon(["sandbox", "list"], env());
    expect(text.stdout.split("\n")[0]).toMatch(/\bSESSION\s+WORKSPACE\b/);
    expect(text.stdout).toContain(shopA);
    expect(text.stdout).toContain(shopB);
  });

  it("shows and applies A's changes in A only: diff and apply in B find nothing", async () => {
    const edit = await inProject(shopA, ["exec"], "--", "sh", "-c", "echo changed in A > file.txt");
    expect(edit.exitCode).toBe(0);

    const diffB = await inProject(shopB, ["diff"]);
    expect(diffB.exitCode).toBe(0);
    expect(diffB.stdout).toBe("");
    expect(diffB.stderr).toContain("no changes");
    const applyB = await inProject(shopB, ["apply"], "--yes");
    expect(applyB.exitCode).toBe(0);
    expect(await readFile(path.join(shopB, "file.txt"), "utf8")).toBe("from project B\n");
    expect(git(shopB, "status", "--porcelain")).toBe("");

    const diffA = await inProject(shopA, ["diff"]);
    expect(diffA.stdout).toContain("-from project A\n+changed in A\n");
    const explainB = await inProject(shopB, ["sandbox", "explain"]);
    expect(explainB.stdout).toContain(`  project      ${shopB} (hashed into the scope key`);
  });

  it("keeps each project's transcript: B's session main never loads A's conversation", async () => {
    const script = path.join(root, "reads-the-file.json");
    await writeFile(
      script,
      JSON.stringify({
        version: 1,
        turns: [
          { content: [{ type: "tool_use", name: "read", input: { path: "file.txt" } }] },
          { content: [{ type: "text", text: "read it" }] },
        ],
      }),
    );
    const runA = await inProject(shopA, ["run"], "--model-script", script, "read file.txt");
    expect(runA.exitCode, runA.stderr).toBe(0);
    const runB = await inProject(shopB, ["run"], "--model-script", script, "read file.txt");
    expect(runB.exitCode, runB.stderr).toBe(0);

    const show = (workspace: string): Promise<CliRun> =>
      runCordon(["sessions", "show", "agent:main:main", "--workspace", workspace], env());
    const showA = await show(shopA);
    const showB = await show(shopB);
    // A's copy holds the agent's edit from the test before.
    expect(showA.stdout).toContain("changed in A");
    expect(showB.stdout).toContain("from project B");
    expect(showB.stdout).not.toMatch(/in A|project A/);
  });
});

describe("rw mode keeps the real repository's .git read-only", () => {
  let root: string;
  let home: string;
  let repo: string;
  const env = (): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    CORDON_WORKSPACE_ACCESS: "rw",
  });
  const inSandbox = (workspace: string, line: string, ...flags: string[]): Promise<CliRun> =>
    runCordon(["exec", "--workspace", workspace, "--session", "rw", ...flags, "--", line], env());

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-gitdir-"));
    await chmod(root, 0o755);
    home = path.join(root, "home");
    repo = await repository(root, "project", "original\n");
    ownTree(repo);
  });

  afterAll(async () => {
    await runCordon(["sandbox", "rm", "--all", "--discard-changes"], env());
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
  });

  it("refuses hooks, config and moving .git (EROFS, EBUSY), yet the workspace is writable", async () => {
    const config = await readFile(path.join(repo, ".git", "config"));

    const hook = await inSandbox(
      repo,
      "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit",
    );
    expect(hook.exitCode).not.toBe(0);
    expect(hook.stderr).toMatch(/\.git\/hooks\/pre-commit: Read-only file system/);
    const fsmonitor = await inSandbox(
      repo,
      "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config",
    );
    expect(fsmonitor.stderr).toMatch(/\.git\/config: Read-only file system/);
    const viaGit = await inSandbox(repo, "git config core.hooksPath /workspace/hooks");
    expect(viaGit.exitCode).not.toBe(0);
    const moved = await inSandbox(repo, "mv .git .git-old && mkdir -p .git/hooks");
    expect(moved.stderr).toMatch(/Device or resource busy/);
    // A hard link would be a writable name for .git/config outside the mount: not across mounts.
    const hardLink = await inSandbox(repo, "ln .git/config config-link");
    expect(hardLink.stderr).toMatch(/Invalid cross-device link/);

    expect(await exists(path.join(repo, ".git", "hooks", "pre-commit"))).toBe(false);
    expect(await readFile(path.join(repo, ".git", "config"))).toEqual(config);
    expect(await exists(path.join(repo, ".git-old"))).toBe(false);

    const work = await inSandbox(
      repo,
      "echo edited > file.txt && echo new > new.txt && git status --short",
    );
    expect(work.exitCode).toBe(0);
    expect(work.stdout).toBe(" M file.txt\n?? new.txt\n");
    expect(await readFile(path.join(repo, "file.txt"), "utf8")).toBe("edited\n");
    expect(await readFile(path.join(repo, "new.txt"), "utf8")).toBe("new\n");
  });

  it("refuses a tool call writing into .git the same way", async () => {
    const result = await runCordon(
      [
        "tool",
        "write",
        "--workspace",
        repo,
        "--session",
        "rw",
        "--input",
        JSON.stringify({
          path: ".git/hooks/post-checkout",
          content: "#!/bin/sh\ntouch /tmp/pwned\n",
        }),
      ],
      env(),
    );
    expect(result.exitCode).toBe(ExitCode.internal);
    expect(result.stderr).toContain(
      "/workspace/.git/hooks/post-checkout: it is on a read-only mount",
    );
    expect(await exists(path.join(repo, ".git", "hooks", "post-checkout"))).toBe(false);
  });

  it("keeps a linked worktree's .git file read-only, so it cannot be re-pointed", async () => {
    const worktree = path.join(root, "worktree");
    // The repository is the sandbox user's now; as root, git wants that said.
    git(repo, "-c", "safe.directory=*", "worktree", "add", "-q", worktree);
    ownTree(worktree);
    const gitFile = await readFile(path.join(worktree, ".git"), "utf8");
    expect(gitFile).toMatch(/^gitdir: /);

    const repoint = await inSandbox(worktree, "echo 'gitdir: /workspace/evil' > .git");
    expect(repoint.stderr).toMatch(/\.git: Read-only file system/);
    expect(await readFile(path.join(worktree, ".git"), "utf8")).toBe(gitFile);
    const work = await inSandbox(worktree, "echo from-worktree > file.txt");
    expect(work.exitCode).toBe(0);
    expect(await readFile(path.join(worktree, "file.txt"), "utf8")).toBe("from-worktree\n");
  });

  it("refuses a .git that is a symlink before any container starts (it could point at a secret)", async () => {
    const secrets = path.join(root, "secrets");
    await mkdir(secrets);
    await writeFile(path.join(secrets, "id_ed25519"), "PRIVATE KEY\n");
    const linked = path.join(root, "linked");
    await mkdir(linked);
    await writeFile(path.join(linked, "file.txt"), "x\n");
    await symlink(secrets, path.join(linked, ".git"));
    ownTree(linked);

    const read = await inSandbox(linked, "cat .git/id_ed25519");
    expect(read.exitCode).toBe(ExitCode.policy);
    expect(read.stdout).not.toContain("PRIVATE KEY");
    expect(read.stderr).toContain(`${linked}/.git is a symlink, so it cannot be mounted read-only`);
    expect(read.stderr).toContain("agents.defaults.sandbox.protectGitDir to false");
  });

  it("with protectGitDir false the agent can write .git, and explain says so", async () => {
    const configPath = path.join(root, "unprotected.json5");
    await writeFile(
      configPath,
      "{ agents: { defaults: { sandbox: { protectGitDir: false } } } }\n",
    );
    const explain = await runCordon(
      ["sandbox", "explain", "--workspace", repo, "--session", "open", "--config", configPath],
      env(),
    );
    expect(explain.stdout).toContain(
      "! agents.defaults.sandbox.protectGitDir is false: the agent can write",
    );
    expect(explain.stdout).not.toContain("[git-dir]");

    const hook = await inSandbox(
      repo,
      "echo '#!/bin/sh' > .git/hooks/pre-push",
      "--config",
      configPath,
    );
    expect(hook.exitCode).toBe(0);
    expect(await readFile(path.join(repo, ".git", "hooks", "pre-push"), "utf8")).toBe(
      "#!/bin/sh\n",
    );
  });
});
