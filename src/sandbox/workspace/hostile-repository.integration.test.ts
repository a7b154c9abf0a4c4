import { execFileSync } from "node:child_process";
import { lstat, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import {
  armSecondVariant,
  attackNames,
  makeHostileRepository,
  markersLeft,
  plantedSecrets,
  runPlainGit,
  type HostileRepository,
} from "../../../test/support/hostile-repository.js";
import { testSandboxSpec } from "../../../test/support/sandbox-spec.js";
import { patchOf } from "../../../test/support/inspect-copy.js";
import { ensurePrivateWorkspace, type PrivateWorkspace } from "./private-workspace.js";
import { privateWorkspacePath } from "./paths.js";

let root: string;
let stateDirectory: string;
let hostile: HostileRepository;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "cordon-hostile-"));
  stateDirectory = path.join(root, "home");
  hostile = await makeHostileRepository(root);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function seed(agentWorkspace: string, name: string): Promise<PrivateWorkspace> {
  const spec = testSandboxSpec(name, { spec: { agentWorkspace, seed: true } });
  return ensurePrivateWorkspace(
    { ...spec, privateWorkspace: privateWorkspacePath(stateDirectory, spec.containerName) },
    { stateDirectory },
  );
}

/** Every regular file below `directory`, recursively, not following links. */
async function allFiles(directory: string): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(directory, { withFileTypes: true })) {
    const child = path.join(directory, entry.name);
    if (entry.isDirectory()) found.push(...(await allFiles(child)));
    else if (entry.isFile()) found.push(child);
  }
  return found;
}

describe("seeding from a hostile repository", () => {
  it("is armed: plain git in copies of the repository runs every attack", async () => {
    const first = path.join(root, "victim-1");
    const second = path.join(root, "victim-2");
    execFileSync("cp", ["-a", hostile.path, first]);
    execFileSync("cp", ["-a", hostile.path, second]);
    armSecondVariant(hostile, second);
    runPlainGit(first);
    runPlainGit(second);
    expect(await markersLeft(hostile)).toEqual([...attackNames].sort());
  });

  it("runs none of them on the host, in either arming", async () => {
    await seed(hostile.path, "hostile-a");
    armSecondVariant(hostile, hostile.path);
    await seed(hostile.path, "hostile-b");
    expect(await markersLeft(hostile)).toEqual([]);
  });

  it("gives the copy a .git with the history and the user's staged state, and no code or credentials", async () => {
    const { path: copy, warnings } = await seed(hostile.path, "hostile-c");
    const gitDir = path.join(copy, ".git");
    expect(await readFile(path.join(gitDir, "config"), "utf8")).toBe(
      "[core]\n\trepositoryformatversion = 0\n\tbare = false\n",
    );
    for (const dropped of ["hooks", "FETCH_HEAD", "description-link"]) {
      await expect(lstat(path.join(gitDir, dropped))).rejects.toThrow(/ENOENT/);
    }
    expect(warnings.join("\n")).toContain(".git/description-link");
    for (const file of await allFiles(copy)) {
      const bytes = await readFile(file, "latin1");
      for (const secret of Object.values(plantedSecrets)) {
        expect(bytes.includes(secret), `${secret} in ${file}`).toBe(false);
      }
    }
    const git = (...args: string[]): string =>
      execFileSync("git", ["-c", "safe.directory=*", ...args], {
        cwd: copy,
        encoding: "utf8",
        env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
      });
    expect(git("log", "--format=%s")).toBe("attributes\ninit\n");
    expect(git("status", "--short")).toBe(" M app.py\n?? data.bin\n");
    // Even git run in the copy (as the agent would, in the sandbox) finds nothing to run.
    expect(await markersLeft(hostile)).toEqual([]);
  });
});

describe("seeding from inside a hostile repository", () => {
  it("lists a subdirectory and a linked worktree without the repository's config running anything", async () => {
    const sub = path.join(hostile.path, "pkg");
    execFileSync("mkdir", ["-p", sub]);
    execFileSync("sh", ["-c", "echo 'x = 1' > pkg/mod.py"], { cwd: hostile.path });
    const worktree = path.join(root, "linked");
    execFileSync("git", ["-c", "core.hooksPath=/dev/null", "worktree", "add", "-q", worktree], {
      cwd: hostile.path,
      env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null" },
    });
    execFileSync("rm", [
      "-f",
      ...(await readdir(hostile.markers)).map((m) => path.join(hostile.markers, m)),
    ]);
    const fromSub = await seed(sub, "hostile-sub");
    const fromWorktree = await seed(worktree, "hostile-linked");
    expect(await markersLeft(hostile)).toEqual([]);
    expect((await readdir(fromSub.path)).sort()).toEqual([".git", "mod.py"]);
    expect((await readdir(fromWorktree.path)).sort()).toEqual([
      ".git",
      ".gitattributes",
      "app.py",
      "notes.txt",
    ]);
    expect(await readFile(path.join(fromWorktree.path, ".git", "config"), "utf8")).not.toContain(
      plantedSecrets.urlToken,
    );
  });
});

describe("diffing a copy the agent armed", () => {
  it("runs nothing the agent planted in the copy's .git, its .gitattributes or a nested repository", async () => {
    const { path: copy } = await seed(hostile.path, "hostile-diff");
    const planted = path.join(root, "planted");
    execFileSync("mkdir", ["-p", planted]);
    // The agent re-arms its copy: its .git and a nested repository get the hostile config and
    // hooks back (the hostile repository's own, as a user's plain git would run them).
    const hostileConfig = await readFile(path.join(hostile.path, ".git", "config"), "utf8");
    await writeFile(path.join(copy, ".git", "config"), hostileConfig);
    execFileSync("cp", ["-a", path.join(hostile.path, ".git", "hooks"), path.join(copy, ".git")]);
    const nested = path.join(copy, "vendor", "lib");
    execFileSync("mkdir", ["-p", nested]);
    execFileSync("cp", ["-a", path.join(hostile.path, ".git"), path.join(nested, ".git")]);
    await writeFile(path.join(nested, "app.py"), "print('nested')\n");
    await writeFile(path.join(copy, "app.py"), "print('changed by the agent')\n");
    await writeFile(path.join(copy, "extra.py"), "x = 2\n");

    // Armed: plain git in the copy, as a user might run it, fires the attacks.
    runPlainGit(copy);
    expect((await markersLeft(hostile)).length).toBeGreaterThan(3);
    execFileSync("sh", ["-c", `rm -f '${hostile.markers}'/*`]);

    const patch = (await patchOf(copy)).toString("utf8");
    expect(await markersLeft(hostile)).toEqual([]);
    // The diff is of the bytes as they are: no clean filter ran over the .py files.
    expect(patch).toContain("+print('changed by the agent')");
    expect(patch).toContain("diff --git a/extra.py b/extra.py");
    // The nested repository is a gitlink, never entered as a repository of its own.
    expect(patch).toMatch(/diff --git a\/vendor\/lib b\/vendor\/lib\nnew file mode 160000/);
  });
});
