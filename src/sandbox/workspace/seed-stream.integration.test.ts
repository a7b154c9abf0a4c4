/**
 * A seed streamed from the user's repository (seed-stream.ts, the copy in engine volumes) holds
 * exactly what the copy-based seed gives, and its baseline is the same tree; and the repository
 * cannot use the stream to reach outside itself, hang it, or run anything.
 */
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import {
  chmod,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  readlink,
  rename,
  rm,
  symlink,
  truncate,
  unlink,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import {
  makeHostileRepository,
  markersLeft,
  plantedSecrets,
} from "../../../test/support/hostile-repository.js";
import { testSandboxSpec } from "../../../test/support/sandbox-spec.js";
import type { SandboxSpec } from "../spec.js";
import { privateWorkspacePath } from "./paths.js";
import { seedClosedCopy, type ClosedSeed } from "./private-workspace.js";
import { planStreamedSeed, streamSeed } from "./seed-stream.js";
import { StreamedBaseline, quotedPath } from "./streamed-baseline.js";
import { DirectorySeedSink } from "./testing/directory-sink.js";

let root: string;
let stateDirectory: string;
let repo: string;
const opened: ClosedSeed[] = [];

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "cordon-seed-stream-"));
  stateDirectory = path.join(root, "home");
  repo = path.join(root, "repo");
  await mkdir(repo);
});

afterEach(async () => {
  for (const seed of opened.splice(0)) await seed.dispose();
  await rm(root, { recursive: true, force: true });
});

const git = (cwd: string, ...args: string[]): string =>
  execFileSync(
    "git",
    ["-c", "user.name=t", "-c", "user.email=t@e", "-c", "safe.directory=*", ...args],
    {
      cwd,
      encoding: "utf8",
      env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
    },
  );

function specOf(name: string, agentWorkspace = repo): SandboxSpec {
  const spec = testSandboxSpec(name, { spec: { agentWorkspace, seed: true } });
  return { ...spec, privateWorkspace: privateWorkspacePath(stateDirectory, spec.containerName) };
}

/** The copy-based seed (as before) and the streamed one of the same repository, as it is now. */
async function seedBothWays(
  name: string,
  agentWorkspace = repo,
): Promise<{
  copied: ClosedSeed;
  streamed: ClosedSeed;
  sink: DirectorySeedSink;
  warnings: string[][];
}> {
  const warnings: string[][] = [[], []];
  const copied = await seedClosedCopy(specOf(`${name}-copied`, agentWorkspace), {
    stateDirectory,
    warnings: warnings[0] ?? [],
  });
  opened.push(copied);
  const sink = new DirectorySeedSink(path.join(root, `${name}-streamed`));
  const streamed = await seedClosedCopy(specOf(`${name}-streamed`, agentWorkspace), {
    stateDirectory,
    warnings: warnings[1] ?? [],
    sink,
  });
  opened.push(streamed);
  return { copied, streamed, sink, warnings };
}

/** Every entry below `directory` but its top `.git`: type, mode, time, link text, content hash. */
async function describeTree(directory: string): Promise<Record<string, string>> {
  const found: Record<string, string> = {};
  const walk = async (relative: string): Promise<void> => {
    for (const name of (await readdir(path.join(directory, relative))).sort()) {
      const child = relative === "" ? name : `${relative}/${name}`;
      if (child === ".git") continue;
      const full = path.join(directory, child);
      const stats = await lstat(full);
      const mode = (stats.mode & 0o7777).toString(8);
      if (stats.isDirectory()) {
        found[child] = `directory ${mode}`;
        await walk(child);
      } else if (stats.isSymbolicLink()) {
        found[child] = `symlink -> ${await readlink(full)}`;
      } else {
        const hash = createHash("sha256")
          .update(await readFile(full))
          .digest("hex");
        found[child] = `file ${mode} ${Math.floor(stats.mtimeMs)} ${hash}`;
      }
    }
  };
  await walk("");
  return found;
}

const baselineTree = (seed: ClosedSeed): string =>
  git(root, "--git-dir", seed.baselineGitDir, "rev-parse", `${seed.baselineCommit}^{tree}`).trim();

const baselineFiles = (seed: ClosedSeed): string[] =>
  git(
    root,
    "--git-dir",
    seed.baselineGitDir,
    "ls-tree",
    "-r",
    "--name-only",
    "-z",
    seed.baselineCommit,
  )
    .split("\0")
    .filter(Boolean)
    .sort();

/** A repository with what real ones have: ignore rules of every kind, links, modes, odd names. */
async function makeRealisticRepository(): Promise<void> {
  git(repo, "init", "-q");
  const write = async (relative: string, content: string | Buffer, mode = 0o644): Promise<void> => {
    await mkdir(path.dirname(path.join(repo, relative)), { recursive: true });
    await writeFile(path.join(repo, relative), content);
    await chmod(path.join(repo, relative), mode);
  };
  await write(".gitignore", "build/\n*.log\n!keep.log\n/local.txt\n");
  await write("src/.gitignore", "generated/\n");
  for (let index = 0; index < 40; index += 1) {
    await write(`src/module${index % 4}/file${index}.ts`, `export const v${index} = ${index};\n`);
  }
  await write("src/deep/er/still/deeper.ts", "export {};\n");
  await write("run.sh", "#!/bin/sh\necho hi\n", 0o755);
  await write("private.txt", "read by the owner only\n", 0o600);
  await write("empty.txt", "");
  await write("binary.bin", Buffer.from([0, 1, 2, 255, 254, 0, 10, 13]));
  await write('with space and "quote".txt', "odd name\n");
  await write("new\nline.txt", "a newline in the name\n");
  await write("ünïcode/naïve.md", "utf-8 names\n");
  await write("gone.txt", "deleted in the work tree later\n");
  await write(".env.example", "TOKEN=\n");
  await symlink("src/module0/file0.ts", path.join(repo, "link-to-file"));
  await symlink("src", path.join(repo, "link-to-dir"));
  await symlink("/etc/hostname", path.join(repo, "link-out"));
  git(repo, "add", "-A");
  // Tracked, yet ignored by the rules: the baseline leaves it out, as `git add -A` does.
  await write("build/tracked-but-ignored.txt", "forced\n");
  await write("src/generated/forced.ts", "forced\n");
  git(repo, "add", "-f", "build/tracked-but-ignored.txt", "src/generated/forced.ts");
  git(repo, "commit", "-qm", "init");
  // The work tree moves on: edits, a staged change, a deletion, untracked files.
  await write("src/module1/file1.ts", "export const v1 = 'edited';\n");
  await write("src/module2/file2.ts", "export const v2 = 'staged';\n");
  git(repo, "add", "src/module2/file2.ts");
  await unlink(path.join(repo, "gone.txt"));
  await write("untracked.ts", "untracked, seeded\n");
  await write("keep.log", "negated: seeded and in the baseline\n");
  await write("debug.log", "ignored: neither\n");
  await write("build/out.js", "ignored: neither\n");
  await write("local.txt", "ignored at the top only\n");
  await write("src/local.txt", "not ignored here\n");
  await write("excluded-locally.txt", "info/exclude leaves it out\n");
  await writeFile(path.join(repo, ".git", "info", "exclude"), "excluded-locally.txt\n");
  await write(".env", "SECRET=1\n");
  await write("big.dat", Buffer.alloc(9 * 1024 * 1024 + 17, 7));
}

describe("a streamed seed", () => {
  it("holds exactly what the copied seed holds, with the same baseline tree", async () => {
    await makeRealisticRepository();
    const { copied, streamed, sink, warnings } = await seedBothWays("same");

    expect(sink.opened).toBe(streamed.directory);
    expect(sink.calls[0]).toBe("open");
    // Nothing of the work tree was copied on this host: the seed directory holds the .git only.
    expect(await readdir(streamed.directory)).toEqual([".git"]);

    const streamedTree = await describeTree(sink.root);
    expect(streamedTree).toEqual(await describeTree(copied.directory));
    expect(streamedTree).toMatchObject({
      "run.sh": expect.stringMatching(/^file 755 /) as unknown,
      "private.txt": expect.stringMatching(/^file 600 /) as unknown,
      "link-out": "symlink -> /etc/hostname",
      "link-to-dir": "symlink -> src",
      "src/deep/er/still": "directory 755",
    });
    expect(Object.keys(streamedTree)).toContain("new\nline.txt");
    expect(Object.keys(streamedTree)).not.toContain(".env");
    expect(Object.keys(streamedTree)).not.toContain("debug.log");
    // The .git both ways: the same files (the copied seed's code, unchanged).
    expect(
      (await readdir(path.join(streamed.directory, ".git"), { recursive: true })).sort(),
    ).toEqual((await readdir(path.join(copied.directory, ".git"), { recursive: true })).sort());

    expect(baselineTree(streamed)).toBe(baselineTree(copied));
    const files = baselineFiles(streamed);
    expect(files).toContain("keep.log");
    expect(files).toContain("src/local.txt");
    expect(files).toContain("link-out");
    expect(files).not.toContain("build/tracked-but-ignored.txt");
    expect(files).not.toContain("src/generated/forced.ts");
    expect(files).not.toContain("excluded-locally.txt");
    expect(
      git(root, "--git-dir", streamed.baselineGitDir, "ls-tree", streamed.baselineCommit, "run.sh"),
    ).toMatch(/^100755 /);

    const { seededAt: _a, ...copiedInfo } = copied.seed;
    const { seededAt: _b, ...streamedInfo } = streamed.seed;
    expect(streamedInfo).toEqual(copiedInfo);
    expect(warnings[1]).toEqual(warnings[0]);
    // The scratch tree of ignore rules is gone with the recording.
    await expect(lstat(`${streamed.baselineGitDir}.rules`)).rejects.toThrow(/ENOENT/);
  });

  it("holds the same for a repository with no ignore rules, and for an empty one", async () => {
    git(repo, "init", "-q");
    await writeFile(path.join(repo, "a.txt"), "a\n");
    const first = await seedBothWays("plain");
    expect(await readdir(first.streamed.directory)).toEqual([".git"]);
    expect(await describeTree(first.sink.root)).toEqual(await describeTree(first.copied.directory));
    expect(baselineTree(first.streamed)).toBe(baselineTree(first.copied));

    await rm(path.join(repo, "a.txt"));
    const empty = await seedBothWays("empty");
    expect(baselineTree(empty.streamed)).toBe(baselineTree(empty.copied));
  });

  it("is not taken where it could differ: a nested repository is copied as before", async () => {
    git(repo, "init", "-q");
    await writeFile(path.join(repo, "a.txt"), "a\n");
    await mkdir(path.join(repo, "vendor", "lib"), { recursive: true });
    git(path.join(repo, "vendor", "lib"), "init", "-q");
    await writeFile(path.join(repo, "vendor", "lib", "index.js"), "1\n");
    git(path.join(repo, "vendor", "lib"), "add", "-A");
    git(path.join(repo, "vendor", "lib"), "commit", "-qm", "nested");
    const { copied, streamed, sink } = await seedBothWays("nested");
    expect(sink.calls).toEqual([]);
    expect(await describeTree(streamed.directory)).toEqual(await describeTree(copied.directory));
    expect(baselineTree(streamed)).toBe(baselineTree(copied));
  });
});

describe("a streamed seed of a hostile repository", () => {
  it("runs nothing, carries no planted credential, and records the bytes as they are", async () => {
    const hostile = await makeHostileRepository(root);
    const { copied, streamed, sink } = await seedBothWays("hostile", hostile.path);
    expect(await markersLeft(hostile)).toEqual([]);
    expect(await readdir(streamed.directory)).toEqual([".git"]);
    for (const directory of [sink.root, streamed.directory, streamed.baselineGitDir]) {
      for (const entry of await readdir(directory, { recursive: true })) {
        const full = path.join(directory, String(entry));
        if (!(await lstat(full)).isFile()) continue;
        const bytes = await readFile(full, "latin1");
        for (const secret of Object.values(plantedSecrets)) {
          expect(bytes.includes(secret), `${secret} in ${full}`).toBe(false);
        }
      }
    }
    expect(await describeTree(sink.root)).toEqual(await describeTree(copied.directory));
    // No clean filter ran: the baseline holds app.py's bytes as they are.
    expect(baselineTree(streamed)).toBe(baselineTree(copied));
    expect(
      git(root, "--git-dir", streamed.baselineGitDir, "show", `${streamed.baselineCommit}:app.py`),
    ).toBe("print('hello, world')\n");
  });

  it("sends links as links and skips a file whose parent leads outside the repository", async () => {
    const outside = path.join(root, "outside");
    await mkdir(outside);
    await writeFile(path.join(outside, "secret.txt"), "host secret\n");
    git(repo, "init", "-q");
    await writeFile(path.join(repo, ".gitignore"), "/escape\n");
    await mkdir(path.join(repo, "escape"));
    await writeFile(path.join(repo, "escape", "secret.txt"), "innocent\n");
    await writeFile(path.join(repo, "ok.txt"), "ok\n");
    git(repo, "add", "-A");
    git(repo, "add", "-f", "escape/secret.txt");
    // The tracked file's directory becomes a link out (ignored, so only the file is listed).
    await rm(path.join(repo, "escape"), { recursive: true });
    await symlink(outside, path.join(repo, "escape"));
    await symlink(path.join(outside, "secret.txt"), path.join(repo, "pointer"));
    const { copied, streamed, sink } = await seedBothWays("links-out");
    expect(sink.calls[0]).toBe("open");
    expect(streamed.seed.skipped).toEqual([
      { path: "escape/secret.txt", reason: "a parent directory leads outside the workspace" },
    ]);
    expect(streamed.seed.skipped).toEqual(copied.seed.skipped);
    expect(await readlink(path.join(sink.root, "pointer"))).toBe(path.join(outside, "secret.txt"));
    for (const entry of await readdir(sink.root, { recursive: true })) {
      const full = path.join(sink.root, String(entry));
      if ((await lstat(full)).isFile())
        expect(await readFile(full, "utf8")).not.toContain("host secret");
    }
    expect(baselineTree(streamed)).toBe(baselineTree(copied));
  });
});

describe("streaming what changes under it", () => {
  /** Plans the repository's listed files, lets `meanwhile` change it, then streams the plan. */
  async function planThenStream(
    listed: string[],
    meanwhile: () => Promise<void>,
    hooks: ConstructorParameters<typeof DirectorySeedSink>[1] = {},
  ): Promise<{
    sink: DirectorySeedSink;
    skipped: { path: string; reason: string }[];
    commit: string;
    gitDir: string;
  }> {
    const sourceRoot = repo;
    const plan = await planStreamedSeed(listed, {
      sourceRoot,
      exclude: [path.join(sourceRoot, ".git")],
      leaveOut: () => Promise.resolve(false),
    });
    if (!plan.streamable) throw new Error(plan.reason);
    await meanwhile();
    const seed = path.join(root, "seed");
    await mkdir(path.join(seed, ".git"), { recursive: true });
    const gitDir = path.join(root, "baseline.git");
    const baseline = await StreamedBaseline.start(seed, {
      gitDir,
      format: { version: 0, extensions: [] },
    });
    const sink = new DirectorySeedSink(path.join(root, "streamed"), hooks);
    await sink.open(seed);
    try {
      const summary = await streamSeed(plan, { sourceRoot, sink, baseline });
      return { sink, skipped: summary.skipped, commit: await baseline.finish(), gitDir };
    } catch (error) {
      await baseline.abort();
      throw error;
    }
  }

  it("skips a file swapped for a FIFO, without hanging, and a file swapped for a link", async () => {
    await writeFile(path.join(repo, "fifo.txt"), "was a file\n");
    await writeFile(path.join(repo, "link.txt"), "was a file\n");
    await writeFile(path.join(repo, "kept.txt"), "kept\n");
    const { sink, skipped, commit, gitDir } = await planThenStream(
      ["fifo.txt", "link.txt", "kept.txt"],
      async () => {
        await unlink(path.join(repo, "fifo.txt"));
        execFileSync("mkfifo", [path.join(repo, "fifo.txt")]);
        await unlink(path.join(repo, "link.txt"));
        await symlink("/etc/hostname", path.join(repo, "link.txt"));
      },
    );
    expect(skipped).toEqual([
      { path: "fifo.txt", reason: "not a regular file" },
      { path: "link.txt", reason: "became a symlink while copying" },
    ]);
    expect(await readdir(sink.root)).toEqual(["kept.txt"]);
    expect(git(root, "--git-dir", gitDir, "ls-tree", "-r", "--name-only", commit)).toBe(
      "kept.txt\n",
    );
  });

  it("skips a file whose directory was swapped for a link out of the repository after it was planned", async () => {
    const outside = path.join(root, "outside");
    await mkdir(outside);
    await writeFile(path.join(outside, "file.txt"), "host secret\n");
    await mkdir(path.join(repo, "dir"));
    await writeFile(path.join(repo, "dir", "file.txt"), "innocent\n");
    const { sink, skipped } = await planThenStream(["dir/file.txt"], async () => {
      await rename(path.join(repo, "dir"), path.join(root, "moved-away"));
      await symlink(outside, path.join(repo, "dir"));
    });
    expect(skipped).toEqual([{ path: "dir/file.txt", reason: "resolves outside the workspace" }]);
    expect(await readdir(path.join(sink.root, "dir"))).toEqual([]);
  });

  it("streams a large file in pieces, and fails clearly, sending no short file, when it shrinks meanwhile", async () => {
    const big = Buffer.alloc(12 * 1024 * 1024, 3);
    await writeFile(path.join(repo, "big.dat"), big);
    const whole = await planThenStream(["big.dat"], () => Promise.resolve());
    // Compared as bytes: a deep equality over 12 MiB holds the test up for minutes.
    expect((await readFile(path.join(whole.sink.root, "big.dat"))).equals(big)).toBe(true);
    expect(
      git(root, "--git-dir", whole.gitDir, "cat-file", "-s", `${whole.commit}:big.dat`).trim(),
    ).toBe(String(big.byteLength));

    await rm(path.join(root, "streamed"), { recursive: true });
    await rm(path.join(root, "seed"), { recursive: true });
    await rm(whole.gitDir, { recursive: true });
    await expect(
      planThenStream(["big.dat"], () => Promise.resolve(), {
        afterFirstChunk: () => truncate(path.join(repo, "big.dat"), 1024),
      }),
    ).rejects.toThrow(/big.dat shrank while it was being seeded/);
    await expect(lstat(path.join(root, "streamed", "big.dat"))).rejects.toThrow(/ENOENT/);
  });
});

describe("quotedPath", () => {
  it("quotes what fast-import would read otherwise", () => {
    expect(quotedPath('a "b"\\c\nd\te')).toBe('"a \\"b\\"\\\\c\\012d\\011e"');
    expect(quotedPath("ünï")).toBe('"ünï"');
  });
});
