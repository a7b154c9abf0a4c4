import { execFileSync } from "node:child_process";
import { lstat, mkdir, mkdtemp, readdir, rm, symlink, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { FileOperationError, SandboxError } from "../../common/index.js";
import type { SandboxSpec } from "../spec.js";
import {
  baselineDirectoriesOf,
  changedFilesOf,
  patchOf,
} from "../../../test/support/inspect-copy.js";
import { baselineRef } from "./baseline.js";
import { baselineGitDir, privateWorkspacePath, seedTempPrefix } from "./paths.js";
import { ensurePrivateWorkspace } from "./private-workspace.js";

let root: string;
let stateDirectory: string;
let agentWorkspace: string;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "cordon-baseline-"));
  stateDirectory = path.join(root, "home");
  agentWorkspace = path.join(root, "repo");
  await mkdir(agentWorkspace);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const containerName = "cordon-unit-baseline";

function spec(): SandboxSpec {
  return {
    scope: "session",
    scopeKey: "session:agent:a:s",
    containerName,
    agentId: "a",
    sessionKey: "agent:a:s",
    workspaceAccess: "none",
    agentWorkspace,
    privateWorkspace: privateWorkspacePath(stateDirectory, containerName),
    seed: true,
    mounts: [],
    docker: {
      image: { source: "builtin" },
      containerPrefix: "cordon",
      workdir: "/workspace",
      readOnlyRoot: true,
      tmpfs: {},
      network: "none",
      user: "1000:1000",
      initUser: "65534:65534",
      capDrop: ["ALL"],
      env: {},
      memoryBytes: 1024 ** 3,
      memorySwapBytes: 1024 ** 3,
      cpus: 1,
      pidsLimit: 256,
      ulimits: [],
      dns: [],
      extraHosts: [],
    },
    configHash: "h",
  };
}

const git = (cwd: string, ...args: string[]): string =>
  execFileSync(
    "git",
    ["-c", "user.name=t", "-c", "user.email=t@e", "-c", "safe.directory=*", ...args],
    {
      cwd,
      encoding: "utf8",
      env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null" },
    },
  );

async function seededRepository(): Promise<string> {
  git(agentWorkspace, "init", "-q");
  await writeFile(path.join(agentWorkspace, "keep.txt"), "keep\n");
  await writeFile(path.join(agentWorkspace, "edit.txt"), "before\n");
  await writeFile(path.join(agentWorkspace, "gone.txt"), "gone\n");
  await writeFile(path.join(agentWorkspace, ".gitignore"), "*.log\n");
  git(agentWorkspace, "add", "-A");
  git(agentWorkspace, "commit", "-qm", "init");
  await writeFile(path.join(agentWorkspace, "untracked.txt"), "seeded too\n");
  const { path: copy } = await ensurePrivateWorkspace(spec(), { stateDirectory });
  return copy;
}

/** Every path below `directory`, sorted. */
async function listTree(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { recursive: true });
  return entries.map(String).sort();
}

describe("the baseline git dir", () => {
  it("lives beside the copy, closed to everyone but cordon, and records the seeded state", async () => {
    const copy = await seededRepository();
    const gitDir = baselineGitDir(copy);
    const stats = await lstat(gitDir);
    expect(stats.mode & 0o777).toBe(0o700);
    expect(stats.uid).toBe(process.getuid?.());
    const files = git(copy, "--git-dir", gitDir, "ls-tree", "-r", "--name-only", baselineRef);
    expect(files.split("\n").filter(Boolean).sort()).toEqual([
      ".gitignore",
      "edit.txt",
      "gone.txt",
      "keep.txt",
      "untracked.txt",
    ]);
    expect((await patchOf(copy)).toString("utf8")).toBe("");
  });

  it("diffs exactly the agent's changes, with a/ b/ prefixes whatever the copy's config says", async () => {
    const copy = await seededRepository();
    // The agent owns the copy's .git: it asks for mnemonic prefixes, no prefixes, a textconv.
    await writeFile(
      path.join(copy, ".git", "config"),
      "[diff]\n\tmnemonicPrefix = true\n\tnoprefix = true\n",
      { flag: "a" },
    );
    await writeFile(path.join(copy, "edit.txt"), "after\n");
    await unlink(path.join(copy, "gone.txt"));
    await writeFile(path.join(copy, "new.txt"), "new\n");
    await writeFile(path.join(copy, "debug.log"), "ignored by the user's .gitignore\n");
    await symlink("keep.txt", path.join(copy, "link"));
    await writeFile(path.join(copy, "blob.bin"), Buffer.from([0, 1, 2, 255]));
    const patch = (await patchOf(copy)).toString("utf8");
    const headers = patch.split("\n").filter((line) => line.startsWith("diff --git"));
    expect(headers).toEqual([
      "diff --git a/blob.bin b/blob.bin",
      "diff --git a/edit.txt b/edit.txt",
      "diff --git a/gone.txt b/gone.txt",
      "diff --git a/link b/link",
      "diff --git a/new.txt b/new.txt",
    ]);
    expect(patch).toContain("GIT binary patch");
    expect(patch).toContain("new file mode 120000");
    // The copy's own index and HEAD are the agent's and stay untouched.
    expect(git(copy, "status", "--short")).toContain("?? new.txt");
  });

  it("leaves out excluded files, taking each name literally, whatever happened to them", async () => {
    const copy = await seededRepository();
    await writeFile(path.join(copy, "edit.txt"), "after\n");
    await unlink(path.join(copy, "gone.txt"));
    await mkdir(path.join(copy, "build"));
    await writeFile(path.join(copy, "build", "out.bin"), Buffer.from([0, 1, 2]));
    // Names that are pathspec magic or globs when not taken literally.
    await writeFile(path.join(copy, "*.txt"), "star\n");
    await writeFile(path.join(copy, ":(glob)new.txt"), "magic\n");
    await writeFile(path.join(copy, "new.txt"), "kept\n");
    const patch = (
      await patchOf(copy, { exclude: ["gone.txt", "build/out.bin", "*.txt", ":(glob)new.txt"] })
    ).toString("utf8");
    const headers = patch.split("\n").filter((line) => line.startsWith("diff --git"));
    expect(headers).toEqual(["diff --git a/edit.txt b/edit.txt", "diff --git a/new.txt b/new.txt"]);
  });

  it("names the seeded directories from the baseline, and leaves out all under an excluded `dir/`", async () => {
    await mkdir(path.join(agentWorkspace, "src", "util"), { recursive: true });
    await writeFile(path.join(agentWorkspace, "src", "util", "str.c"), "int x;\n");
    const copy = await seededRepository();
    // What the copy has now is not the baseline: a build tree, and a seeded directory emptied.
    await mkdir(path.join(copy, "_build", "tests"), { recursive: true });
    await writeFile(path.join(copy, "_build", "tests", "CTestTestfile.cmake"), "# generated\n");
    await rm(path.join(copy, "src"), { recursive: true });
    expect([...(await baselineDirectoriesOf(copy))].sort()).toEqual(["src", "src/util"]);
    await writeFile(path.join(copy, "edit.txt"), "after\n");
    const patch = (await patchOf(copy, { exclude: ["_build/"] })).toString("utf8");
    const headers = patch.split("\n").filter((line) => line.startsWith("diff --git"));
    expect(headers).toEqual([
      "diff --git a/edit.txt b/edit.txt",
      "diff --git a/src/util/str.c b/src/util/str.c",
    ]);
  });

  it("lists the changed files with what each is now, so two lists tell what a command wrote", async () => {
    const copy = await seededRepository();
    await writeFile(path.join(copy, "edit.txt"), "after\n");
    const before = await changedFilesOf(copy);
    await writeFile(path.join(copy, "report.bin"), Buffer.from([0, 255]));
    await unlink(path.join(copy, "gone.txt"));
    const after = await changedFilesOf(copy);
    expect([...before.keys()]).toEqual(["edit.txt"]);
    expect(after.get("edit.txt")).toBe(before.get("edit.txt"));
    expect(after.get("edit.txt")).toMatch(/^100644 [0-9a-f]{40}$/);
    expect(after.get("gone.txt")).toBe("deleted");
    expect(after.get("report.bin")).toMatch(/^100644 [0-9a-f]{40}$/);
  });

  it("leaves nothing of the agent's files in the baseline git dir", async () => {
    const copy = await seededRepository();
    const gitDir = baselineGitDir(copy);
    const before = await listTree(gitDir);
    await writeFile(path.join(copy, "big.bin"), Buffer.alloc(1024 * 1024, 7));
    await writeFile(path.join(copy, "edit.txt"), "after\n");
    const patch = (await patchOf(copy)).toString("utf8");
    expect(patch).toContain("diff --git a/big.bin b/big.bin");
    expect(await listTree(gitDir)).toEqual(before);
  });

  it("stops git that a FIFO the agent left would block forever, with an error that says so", async () => {
    const copy = await seededRepository();
    // A nested "repository" whose HEAD is a FIFO: git opens it to record a gitlink, and waits.
    await mkdir(path.join(copy, "sub", ".git", "objects"), { recursive: true });
    await mkdir(path.join(copy, "sub", ".git", "refs"));
    execFileSync("mkfifo", [path.join(copy, "sub", ".git", "HEAD")]);
    const attempt = patchOf(copy, { timeoutMs: 1500 });
    await expect(attempt).rejects.toThrow(SandboxError);
    await expect(attempt).rejects.toThrow(/did not finish in 2 s .*FIFO/);
    expect(await readdir(baselineGitDir(copy))).not.toContain(
      expect.stringMatching(/^diff-/) as unknown,
    );
  });

  it("keeps a sha256 repository's object format in the copy and the baseline", async () => {
    git(agentWorkspace, "init", "-q", "--object-format=sha256");
    await writeFile(path.join(agentWorkspace, "a.txt"), "a\n");
    git(agentWorkspace, "add", "-A");
    git(agentWorkspace, "commit", "-qm", "init");
    const { path: copy } = await ensurePrivateWorkspace(spec(), { stateDirectory });
    expect(git(copy, "rev-parse", "--show-object-format")).toBe("sha256\n");
    expect(git(copy, "log", "--format=%s")).toBe("init\n");
    await writeFile(path.join(copy, "a.txt"), "b\n");
    const patch = (await patchOf(copy)).toString("utf8");
    expect(patch).toMatch(/^index [0-9a-f]{64}\.\.[0-9a-f]{64} 100644$/m);
    // The real repository (sha256) takes the patch.
    execFileSync("git", ["apply", "--check", "-"], { cwd: agentWorkspace, input: patch });
  });

  it("refuses a workspace without a baseline, saying how to get one", async () => {
    const bare = path.join(root, "plain");
    await mkdir(bare);
    const attempt = patchOf(bare);
    await expect(attempt).rejects.toThrow(FileOperationError);
    await expect(attempt).rejects.toMatchObject({
      reason: "not_found",
      fix: expect.stringContaining("cordon sandbox rm") as unknown,
    });
  });

  it("replaces a baseline that a crash left without its copy, and removes abandoned ones", async () => {
    const target = privateWorkspacePath(stateDirectory, containerName);
    await mkdir(path.join(baselineGitDir(target), "objects"), { recursive: true });
    await writeFile(path.join(baselineGitDir(target), "HEAD"), "stale\n");
    const abandoned = `${seedTempPrefix(target)}4194305-xyz.baseline.git`;
    await mkdir(abandoned);
    const copy = await seededRepository();
    expect((await patchOf(copy)).toString("utf8")).toBe("");
    const names = await readdir(path.dirname(target));
    expect(names.sort()).toEqual([
      `.${containerName}.baseline.git`,
      `.${containerName}.seed.json`,
      containerName,
    ]);
  });
});
