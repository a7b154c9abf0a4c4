import { execFileSync } from "node:child_process";
import {
  chmod,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readlink,
  readdir,
  rm,
  stat,
  symlink,
  writeFile,
} from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { AbortedError, SandboxStartError } from "../../common/index.js";
import type { SandboxSpec } from "../spec.js";
import { baselineRef } from "./baseline.js";
import { checkAgentWorkspaceAccess, ensurePrivateWorkspace } from "./private-workspace.js";
import { baselineGitDir, privateWorkspacePath, seedMarkerPath, seedTempPrefix } from "./paths.js";
import { TreeCopier } from "./tree-copy.js";

let root: string;
let stateDirectory: string;
let agentWorkspace: string;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "cordon-ws-"));
  stateDirectory = path.join(root, "home");
  agentWorkspace = path.join(root, "repo");
  await mkdir(agentWorkspace);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

function spec(overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  const containerName = "cordon-unit-abc123";
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
    ...overrides,
  };
}

const git = (cwd: string, ...args: string[]): string =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@e", ...args], {
    cwd,
    encoding: "utf8",
  });

async function makeRepository(): Promise<void> {
  git(agentWorkspace, "init", "-q");
  await writeFile(path.join(agentWorkspace, ".gitignore"), "secret.env\nbuild/\n");
  await writeFile(path.join(agentWorkspace, "tracked.txt"), "tracked\n");
  await mkdir(path.join(agentWorkspace, "src", "deep"), { recursive: true });
  await writeFile(path.join(agentWorkspace, "src", "deep", "code.ts"), "export {};\n");
  await symlink("/etc/passwd", path.join(agentWorkspace, "escape"));
  git(agentWorkspace, "add", ".");
  git(agentWorkspace, "commit", "-qm", "init");
  await writeFile(path.join(agentWorkspace, "secret.env"), "API_KEY=sk-do-not-copy\n");
  await mkdir(path.join(agentWorkspace, "build"));
  await writeFile(path.join(agentWorkspace, "build", "out.js"), "ignored\n");
  await writeFile(path.join(agentWorkspace, "untracked.txt"), "new\n");
}

describe("ensurePrivateWorkspace", () => {
  it("seeds a git repository with tracked and untracked files, .git, and no ignored ones", async () => {
    await makeRepository();
    const result = await ensurePrivateWorkspace(spec(), { stateDirectory });
    expect(result.created).toBe(true);
    expect(result.seed?.method).toBe("git");
    const copy = result.path;
    expect(await readFile(path.join(copy, "tracked.txt"), "utf8")).toBe("tracked\n");
    expect(await readFile(path.join(copy, "untracked.txt"), "utf8")).toBe("new\n");
    expect(await readFile(path.join(copy, "src/deep/code.ts"), "utf8")).toBe("export {};\n");
    await expect(lstat(path.join(copy, "secret.env"))).rejects.toThrow(/ENOENT/);
    await expect(lstat(path.join(copy, "build"))).rejects.toThrow(/ENOENT/);
    expect((await lstat(path.join(copy, ".git"))).isDirectory()).toBe(true);
    // The copy is a working repository: the untracked file is the only change.
    expect(git(copy, "-c", "safe.directory=*", "status", "--porcelain")).toBe("?? untracked.txt\n");
    // The baseline, beside the copy, holds the seeded state, untracked file included.
    const files = git(
      copy,
      "--git-dir",
      baselineGitDir(copy),
      "ls-tree",
      "-r",
      "--name-only",
      baselineRef,
    );
    expect(files.split("\n").filter(Boolean).sort()).toEqual([
      ".gitignore",
      "escape",
      "src/deep/code.ts",
      "tracked.txt",
      "untracked.txt",
    ]);
    // The copy's .git is the agent's, and cordon's baseline is not in it.
    expect((await lstat(path.join(copy, ".git", "HEAD"))).uid).toBe(1000);
    expect(git(copy, "-c", "safe.directory=*", "for-each-ref", "refs/cordon")).toBe("");
  });

  it("leaves out objects/info/alternates, saying the copy's history may be incomplete", async () => {
    await makeRepository();
    const elsewhere = path.join(root, "elsewhere-objects");
    await mkdir(elsewhere);
    await writeFile(
      path.join(agentWorkspace, ".git", "objects", "info", "alternates"),
      `${elsewhere}\n`,
    );
    const result = await ensurePrivateWorkspace(spec(), { stateDirectory });
    await expect(
      lstat(path.join(result.path, ".git", "objects", "info", "alternates")),
    ).rejects.toThrow(/ENOENT/);
    expect(result.warnings.join("\n")).toMatch(/alternates points git at objects elsewhere/);
  });

  it("copies a symlink that points out of the workspace as a link, never its target", async () => {
    await makeRepository();
    const { path: copy } = await ensurePrivateWorkspace(spec(), { stateDirectory });
    const link = await lstat(path.join(copy, "escape"));
    expect(link.isSymbolicLink()).toBe(true);
    expect(await readlink(path.join(copy, "escape"))).toBe("/etc/passwd");
  });

  it("gives the copy to the container user (uid 1000) and keeps parents private", async () => {
    await makeRepository();
    const { path: copy } = await ensurePrivateWorkspace(spec(), { stateDirectory });
    for (const entry of [copy, path.join(copy, "tracked.txt"), path.join(copy, "src/deep")]) {
      const stats = await lstat(entry);
      expect([stats.uid, stats.gid]).toEqual([1000, 1000]);
    }
    expect((await lstat(path.join(copy, "escape"))).uid).toBe(1000);
    // Everything, .git included, was made the container user's before the copy was opened.
    const owners = new Set<number>();
    const walk = async (directory: string): Promise<void> => {
      owners.add((await lstat(directory)).uid);
      for (const entry of await readdir(directory, { withFileTypes: true })) {
        const child = path.join(directory, entry.name);
        if (entry.isDirectory()) await walk(child);
        else owners.add((await lstat(child)).uid);
      }
    };
    await walk(copy);
    expect([...owners]).toEqual([1000]);
    expect((await stat(path.dirname(copy))).mode & 0o777).toBe(0o700);
    // The user's own files keep their owner.
    expect((await stat(path.join(agentWorkspace, "tracked.txt"))).uid).toBe(process.getuid?.());
  });

  it("seeds once: a second call leaves the copy alone", async () => {
    await makeRepository();
    const first = await ensurePrivateWorkspace(spec(), { stateDirectory });
    await writeFile(path.join(first.path, "agent-work.txt"), "kept\n");
    await writeFile(path.join(agentWorkspace, "later.txt"), "not copied\n");
    const second = await ensurePrivateWorkspace(spec(), { stateDirectory });
    expect(second.created).toBe(false);
    expect(second.seed).toBeUndefined();
    expect(await readFile(path.join(first.path, "agent-work.txt"), "utf8")).toBe("kept\n");
    await expect(lstat(path.join(first.path, "later.txt"))).rejects.toThrow(/ENOENT/);
    const marker = JSON.parse(await readFile(seedMarkerPath(first.path), "utf8")) as {
      method: string;
    };
    expect(marker.method).toBe("git");
  });

  it("redoes a seed that a crashed process left half done", async () => {
    await writeFile(path.join(agentWorkspace, "a.txt"), "a\n");
    const target = privateWorkspacePath(stateDirectory, "cordon-unit-abc123");
    await mkdir(path.dirname(target), { recursive: true });
    // A dead process's temporary directory (pid 2^22 + 1 is above Linux's pid_max).
    const abandoned = `${seedTempPrefix(target)}4194305-xyz`;
    await mkdir(abandoned);
    await writeFile(path.join(abandoned, "half.txt"), "half");
    const result = await ensurePrivateWorkspace(spec(), { stateDirectory });
    expect(result.seed?.files).toBe(1);
    // A plain directory's copy gets a repository of cordon's own, for the baseline.
    expect(await readdir(result.path)).toEqual([".git", "a.txt"]);
    const leftovers = (await readdir(path.dirname(target))).filter((n) => n.includes("seeding"));
    expect(leftovers).toEqual([]);
  });

  it("copies a plain directory whole: dotfiles, links as links, and skips sockets", async () => {
    await writeFile(path.join(agentWorkspace, ".env"), "X=1\n");
    await writeFile(path.join(agentWorkspace, ".editorconfig"), "root = true\n");
    await mkdir(path.join(agentWorkspace, "sub"));
    await writeFile(path.join(agentWorkspace, "sub", "f"), "f\n");
    await symlink("../.env", path.join(agentWorkspace, "sub", "link"));
    await symlink(root, path.join(agentWorkspace, "outside-dir"));
    const server = createServer();
    await new Promise<void>((resolve) =>
      server.listen(path.join(agentWorkspace, "daemon.sock"), resolve),
    );
    try {
      const result = await ensurePrivateWorkspace(spec(), { stateDirectory });
      expect(result.seed?.method).toBe("copy");
      expect((await readdir(result.path)).sort()).toEqual([
        ".editorconfig",
        ".git",
        "outside-dir",
        "sub",
      ]);
      expect(result.seed?.repository).toBe(false);
      expect(result.seed?.leftOut).toEqual([".env"]);
      // A link is copied as a link: it names .env, but leads nowhere in the copy.
      expect(await readlink(path.join(result.path, "sub", "link"))).toBe("../.env");
      expect((await lstat(path.join(result.path, "outside-dir"))).isSymbolicLink()).toBe(true);
      expect(result.seed?.skipped.map((s) => s.path)).toEqual(["daemon.sock"]);
    } finally {
      server.close();
    }
  });

  it("refuses an existing private workspace the agent made unwritable, and changes nothing", async () => {
    const target = privateWorkspacePath(stateDirectory, "cordon-unit-abc123");
    await mkdir(path.join(target, "sub"), { recursive: true });
    await writeFile(path.join(target, "sub", "file"), "x");
    await symlink("/etc/passwd", path.join(target, "link"));
    // As the agent leaves it: its own, mode 0555; a root file inside shows any chown walk.
    execFileSync("chown", [
      "-h",
      "1000:1000",
      target,
      path.join(target, "sub"),
      path.join(target, "link"),
    ]);
    await chmod(target, 0o555);
    const attempt = ensurePrivateWorkspace(spec(), { stateDirectory });
    await expect(attempt).rejects.toThrow(SandboxStartError);
    await expect(attempt).rejects.toMatchObject({
      exitCode: 3,
      message: expect.stringMatching(/not writable by the container user 1000:1000/) as unknown,
      fix: expect.stringContaining("cordon sandbox rm cordon-unit-abc123") as unknown,
    });
    expect((await lstat(path.join(target, "sub", "file"))).uid).toBe(0);
    expect((await lstat(target)).mode & 0o777).toBe(0o555);
  });

  it("waits for a workspace another cordon process is still handing over", async () => {
    const target = privateWorkspacePath(stateDirectory, "cordon-unit-abc123");
    await mkdir(target, { recursive: true });
    // Made by the other process a moment before it gives it to the container user.
    setTimeout(() => execFileSync("chown", ["1000:1000", target]), 300);
    const result = await ensurePrivateWorkspace(spec(), { stateDirectory });
    expect(result.created).toBe(false);
  });

  it("copies a subdirectory of a repository by git's rules, and an ignored one whole", async () => {
    await makeRepository();
    await writeFile(path.join(agentWorkspace, "build", ".env"), "TOKEN=1\n");
    const sub = await ensurePrivateWorkspace(
      spec({ agentWorkspace: path.join(agentWorkspace, "src") }),
      {
        stateDirectory,
      },
    );
    expect(sub.seed?.method).toBe("git");
    expect((await readdir(sub.path)).sort()).toEqual([".git", "deep"]);
    expect(sub.warnings.join("\n")).toMatch(/subdirectory of a git repository/);

    const ignored = await ensurePrivateWorkspace(
      spec({
        agentWorkspace: path.join(agentWorkspace, "build"),
        containerName: "cordon-unit-other",
        privateWorkspace: privateWorkspacePath(stateDirectory, "cordon-unit-other"),
      }),
      { stateDirectory },
    );
    expect(ignored.seed?.method).toBe("copy");
    // Copied whole, but the .env is left out as anywhere else, and said so.
    expect((await readdir(ignored.path)).sort()).toEqual([".git", "out.js"]);
    expect(ignored.warnings.join("\n")).toMatch(/ignored by the git repository/);
    expect(ignored.warnings.join("\n")).toContain("left secret-shaped paths out of the seed: .env");
  });

  it("leaves secret-shaped paths out of a plain folder's seed, says which, and seeds what seedInclude names", async () => {
    const files: Record<string, string> = {
      ".env": "KEY=1\n",
      ".env.production": "KEY=2\n",
      ".env.example": "KEY=\n",
      ".ssh/id_rsa": "key\n",
      "deploy/.aws/credentials": "[default]\n",
      ".gnupg/secring.gpg": "x",
      ".netrc": "machine x password y\n",
      ".git-credentials": "https://u:p@host\n",
      "certs/server.pem": "pem\n",
      "fixtures/id_ed25519": "key\n",
      ".npmrc": "//registry.npmjs.org/:_authToken=npm_secret\n",
      "pkg/.npmrc": "save-exact=true\n",
      ".pypirc": "[pypi]\npassword = pypi-token\n",
      "src/app.js": "app\n",
    };
    for (const [name, content] of Object.entries(files)) {
      await mkdir(path.dirname(path.join(agentWorkspace, name)), { recursive: true });
      await writeFile(path.join(agentWorkspace, name), content);
    }
    const result = await ensurePrivateWorkspace(spec(), { stateDirectory });
    const present = async (name: string) =>
      lstat(path.join(result.path, name)).then(
        () => true,
        () => false,
      );
    for (const kept of ["src/app.js", "pkg/.npmrc"]) expect(await present(kept)).toBe(true);
    for (const name of Object.keys(files).filter(
      (n) => !["src/app.js", "pkg/.npmrc"].includes(n),
    )) {
      expect(await present(name), name).toBe(false);
    }
    expect(await present(".ssh")).toBe(false);
    expect(result.seed?.leftOut).toEqual([
      ".env",
      ".env.example",
      ".env.production",
      ".git-credentials",
      ".gnupg/",
      ".netrc",
      ".npmrc",
      ".pypirc",
      ".ssh/",
      "certs/server.pem",
      "deploy/.aws/",
      "fixtures/id_ed25519",
    ]);
    const note = result.warnings.find((w) => w.startsWith("left secret-shaped paths"));
    expect(note).toContain("(to seed one on purpose, name it in sandbox.seedInclude)");

    const included = await ensurePrivateWorkspace(
      spec({
        containerName: "cordon-unit-included",
        privateWorkspace: privateWorkspacePath(stateDirectory, "cordon-unit-included"),
        seedInclude: ["certs", ".env.example"],
      }),
      { stateDirectory },
    );
    expect(await readFile(path.join(included.path, "certs", "server.pem"), "utf8")).toBe("pem\n");
    expect(await readFile(path.join(included.path, ".env.example"), "utf8")).toBe("KEY=\n");
    expect(included.seed?.leftOut).not.toContain("certs/server.pem");
  });

  it("leaves a tracked .env out of a repository's seed, and keeps a tracked .env.example", async () => {
    await writeFile(path.join(agentWorkspace, ".env"), "KEY=committed\n");
    await writeFile(path.join(agentWorkspace, ".env.example"), "KEY=\n");
    await writeFile(path.join(agentWorkspace, "app.js"), "app\n");
    git(agentWorkspace, "init", "-q");
    git(agentWorkspace, "add", "-A");
    git(agentWorkspace, "commit", "-qm", "init");
    await writeFile(path.join(agentWorkspace, ".env.sample"), "untracked template\n");
    const result = await ensurePrivateWorkspace(spec(), { stateDirectory });
    expect(result.seed?.method).toBe("git");
    expect((await readdir(result.path)).sort()).toEqual([".env.example", ".git", "app.js"]);
    expect(result.seed?.leftOut).toEqual([".env", ".env.sample"]);
  });

  it("creates an empty workspace when seeding is off", async () => {
    await writeFile(path.join(agentWorkspace, "a.txt"), "a\n");
    const result = await ensurePrivateWorkspace(spec({ seed: false }), { stateDirectory });
    expect(result.created).toBe(true);
    expect(await readdir(result.path)).toEqual([]);
    expect((await stat(result.path)).uid).toBe(1000);
  });

  it("refuses a private workspace that contains the agent workspace or the state directory", async () => {
    await expect(
      ensurePrivateWorkspace(spec({ privateWorkspace: agentWorkspace }), { stateDirectory }),
    ).rejects.toThrow(SandboxStartError);
    await expect(
      ensurePrivateWorkspace(spec({ privateWorkspace: root }), { stateDirectory }),
    ).rejects.toThrow(/contains the agent workspace/);
    await expect(
      ensurePrivateWorkspace(spec({ privateWorkspace: stateDirectory }), { stateDirectory }),
    ).rejects.toThrow(/contains the state directory/);
  });

  it(
    "creates one under a configured root outside the state directory, but never chowns what it finds there",
    { timeout: 15_000 },
    async () => {
      const configuredRoot = path.join(root, "srv");
      const created = await ensurePrivateWorkspace(
        spec({ privateWorkspace: path.join(configuredRoot, "cordon-unit-abc123"), seed: false }),
        { stateDirectory },
      );
      expect(created.created).toBe(true);
      expect((await stat(created.path)).uid).toBe(1000);

      const existing = path.join(configuredRoot, "cordon-unit-existing");
      await mkdir(existing);
      await writeFile(path.join(existing, "mine"), "x");
      await expect(
        ensurePrivateWorkspace(
          spec({ privateWorkspace: existing, containerName: "cordon-unit-existing" }),
          { stateDirectory },
        ),
      ).rejects.toThrow(/not writable by the container user/);
      expect((await stat(path.join(existing, "mine"))).uid).toBe(0);
    },
  );

  it("keeps the baseline out of a repository the state directory lives in", async () => {
    // CORDON_HOME inside some repository, seeding from a plain directory elsewhere.
    const outer = path.join(root, "outer-repo");
    await mkdir(outer);
    git(outer, "init", "-q");
    const inner = path.join(outer, ".cordon");
    await writeFile(path.join(agentWorkspace, "a.txt"), "a\n");
    const result = await ensurePrivateWorkspace(
      spec({ privateWorkspace: privateWorkspacePath(inner, "cordon-unit-abc123") }),
      { stateDirectory: inner },
    );
    expect(git(outer, "for-each-ref")).toBe("");
    expect(
      git(
        result.path,
        "--git-dir",
        baselineGitDir(result.path),
        "ls-tree",
        "-r",
        "--name-only",
        baselineRef,
      ),
    ).toBe("a.txt\n");
  });

  it("does not copy a private workspaces root that lives inside the workspace", async () => {
    await makeRepository();
    const configuredRoot = path.join(agentWorkspace, "sandboxes");
    const first = await ensurePrivateWorkspace(
      spec({ privateWorkspace: path.join(configuredRoot, "cordon-unit-abc123") }),
      { stateDirectory },
    );
    const second = await ensurePrivateWorkspace(
      spec({
        containerName: "cordon-unit-second",
        privateWorkspace: path.join(configuredRoot, "cordon-unit-second"),
      }),
      { stateDirectory },
    );
    expect(first.seed?.files).toBe(second.seed?.files);
    await expect(lstat(path.join(second.path, "sandboxes"))).rejects.toThrow(/ENOENT/);
  });

  it("does not copy the state directory when it lives inside the workspace", async () => {
    await writeFile(path.join(agentWorkspace, "a.txt"), "a\n");
    const inner = path.join(agentWorkspace, ".cordon");
    const result = await ensurePrivateWorkspace(
      spec({ privateWorkspace: privateWorkspacePath(inner, "cordon-unit-abc123") }),
      { stateDirectory: inner },
    );
    expect(await readdir(result.path)).toEqual([".git", "a.txt"]);
  });
});

describe("TreeCopier", () => {
  it("never reads a listed file through a parent that is a symlink out of the source", async () => {
    const outside = path.join(root, "outside");
    await mkdir(outside);
    await writeFile(path.join(outside, "secret"), "host secret");
    await symlink(outside, path.join(agentWorkspace, "link"));
    await writeFile(path.join(agentWorkspace, "ok.txt"), "ok");
    const target = path.join(root, "target");
    await mkdir(target);
    const summary = await new TreeCopier({ sourceRoot: agentWorkspace, targetRoot: target })
      // A crafted listing (e.g. a hand-made git index) naming a path through the link.
      .copyEntries(["ok.txt", "link", "link/secret", "../outside/secret", "/etc/passwd"]);
    expect(summary.files).toBe(1);
    expect((await readdir(target)).sort()).toEqual(["link", "ok.txt"]);
    expect(summary.skipped.map((s) => s.path)).toEqual([
      "link/secret",
      "../outside/secret",
      "/etc/passwd",
    ]);
  });
});

describe("TreeCopier, second line of defence", () => {
  it("refuses a file whose open descriptor lies outside the source, even past the parent check", async () => {
    const outside = path.join(root, "outside");
    await mkdir(outside);
    await writeFile(path.join(outside, "secret"), "host secret");
    await symlink(outside, path.join(agentWorkspace, "link"));
    const target = path.join(root, "target");
    await mkdir(target);
    const copier = new TreeCopier({ sourceRoot: agentWorkspace, targetRoot: target });
    // As if the parent was swapped for a symlink right after it was checked.
    (copier as unknown as { sourceParentPlace: () => Promise<string> }).sourceParentPlace = () =>
      Promise.resolve("inside");
    (copier as unknown as { ensureTargetDirectory: () => Promise<boolean> }).ensureTargetDirectory =
      () => Promise.resolve(true);
    const summary = await copier.copyEntries(["link/secret"]);
    expect(summary.files).toBe(0);
    expect(summary.skipped).toEqual([
      { path: "link/secret", reason: "resolves outside the workspace" },
    ]);
    expect(await readdir(target)).toEqual([]);
  });
});

describe("ensurePrivateWorkspace with an aborted signal", () => {
  it("stops before creating anything", async () => {
    await writeFile(path.join(agentWorkspace, "a.txt"), "a\n");
    await expect(
      ensurePrivateWorkspace(spec(), { stateDirectory, signal: AbortSignal.abort() }),
    ).rejects.toThrow(AbortedError);
    const parent = path.dirname(privateWorkspacePath(stateDirectory, "cordon-unit-abc123"));
    expect(await readdir(parent)).toEqual([]);
  });
});

describe("checkAgentWorkspaceAccess", () => {
  it("warns when the container user cannot write an rw workspace, without touching it", async () => {
    const before = await stat(agentWorkspace);
    const warning = await checkAgentWorkspaceAccess(
      spec({ workspaceAccess: "rw", privateWorkspace: undefined }),
    );
    expect(warning).toMatch(/cannot write the agent workspace/);
    expect(warning).toContain("sandbox.docker.user");
    const after = await stat(agentWorkspace);
    expect([after.uid, after.mode]).toEqual([before.uid, before.mode]);
  });

  it("is silent when the workspace belongs to the container user", async () => {
    execFileSync("chown", ["1000:1000", agentWorkspace]);
    expect(
      await checkAgentWorkspaceAccess(spec({ workspaceAccess: "rw", privateWorkspace: undefined })),
    ).toBeUndefined();
  });
});
