import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { PatchParseError, parsePatch, type PatchedFile } from "./parse-git-patch.js";
import { patchProblems } from "./patch-problems.js";

const gitEnv = {
  ...process.env,
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_AUTHOR_NAME: "t",
  GIT_AUTHOR_EMAIL: "t@t",
  GIT_COMMITTER_NAME: "t",
  GIT_COMMITTER_EMAIL: "t@t",
};

/** A git repository whose staged changes against its first commit are the patch under test. */
class Repo {
  constructor(readonly dir: string) {}
  git(...args: string[]): Buffer {
    return execFileSync("git", args, { cwd: this.dir, env: gitEnv });
  }
  file(name: string, content: string | Uint8Array): Promise<void> {
    return writeFile(path.join(this.dir, name), content);
  }
  /** What cordon takes: forced a/ b/ prefixes, binary, full index, no renames guessed away. */
  diff(...config: string[]): Buffer {
    this.git("add", "-A");
    return this.git(
      ...config.flatMap((c) => ["-c", c]),
      "diff",
      "--cached",
      "--binary",
      "--full-index",
      "HEAD",
    );
  }
}

function refusal(patch: Uint8Array | string): PatchParseError {
  try {
    parsePatch(patch);
  } catch (error) {
    if (error instanceof PatchParseError) return error;
    throw error;
  }
  throw new Error("the patch was accepted");
}

const summary = (files: PatchedFile[]) =>
  files.map((f) => ({ path: f.path, change: f.change, mode: f.mode, target: f.symlinkTarget }));

describe("parsePatch: git's own output", () => {
  let root: string;
  let repo: Repo;
  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-parse-"));
    repo = new Repo(root);
    repo.git("init", "-q");
    await repo.file("code.py", "x = 1\n");
    await repo.file("gone.txt", "bye\n");
    await repo.file("run.sh", "echo\n");
    await repo.file("blob.bin", Buffer.from([0, 1, 2, 3]));
    await repo.file("moved.txt", "same\n");
    await mkdir(path.join(root, "sub"));
    await symlink("../code.py", path.join(root, "sub", "link"));
    await symlink("code.py", path.join(root, "inside"));
    repo.git("add", "-A");
    repo.git("commit", "-qm", "base");
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("reads every kind of change git writes", async () => {
    await repo.file("code.py", "x = 2\n");
    await unlink(path.join(root, "gone.txt"));
    execFileSync("chmod", ["+x", path.join(root, "run.sh")]);
    await repo.file("blob.bin", Buffer.from([0, 1, 2, 3, 4, 0]));
    await repo.file("new.bin", Buffer.from([0, 255, 254]));
    repo.git("mv", "moved.txt", "now here.txt");
    await repo.file("my file", "spaces\n");
    await repo.file("\u00e4.txt", "umlaut\n");
    await unlink(path.join(root, "inside"));
    await symlink("run.sh", path.join(root, "inside"));

    const files = summary(parsePatch(repo.diff()));
    expect(files).toEqual([
      { path: "blob.bin", change: "modified", mode: "100644", target: undefined },
      { path: "code.py", change: "modified", mode: "100644", target: undefined },
      { path: "gone.txt", change: "deleted", mode: undefined, target: undefined },
      { path: "inside", change: "modified", mode: "120000", target: "run.sh" },
      { path: "my file", change: "added", mode: "100644", target: undefined },
      { path: "new.bin", change: "added", mode: "100644", target: undefined },
      { path: "now here.txt", change: "renamed", mode: undefined, target: undefined },
      { path: "run.sh", change: "mode", mode: "100755", target: undefined },
      { path: "ä.txt", change: "added", mode: "100644", target: undefined },
    ]);
    // With quotePath off the name is raw UTF-8 bytes; it reads the same.
    expect(summary(parsePatch(repo.diff("core.quotePath=false"))).at(-1)?.path).toBe("ä.txt");
  });

  it("reports the real path of a change whose content line looks like a +++ header", async () => {
    // The agent edits a test and hides it behind an added line `++ b/calc.py`, which git writes
    // as `+++ b/calc.py`: a line scanner takes that for the file's header.
    await mkdir(path.join(root, "tests"));
    await repo.file("calc.py", "def add(a, b):\n    return a + b\n");
    repo.git("add", "-A");
    repo.git("commit", "-qm", "calc");
    await repo.file("tests/test_calc.py", "assert True\n++ b/calc.py\n");
    const files = parsePatch(repo.diff());
    expect(files.map((f) => f.path)).toEqual(["tests/test_calc.py"]);
    expect(repo.diff().toString()).toContain("\n+++ b/calc.py\n");
  });

  it("refuses patches made with the copy's mnemonic or missing prefixes", async () => {
    await repo.file("code.py", "x = 3\n");
    expect(repo.diff("diff.mnemonicPrefix=true").toString()).toContain(
      "diff --git c/code.py i/code.py",
    );
    expect(refusal(repo.diff("diff.mnemonicPrefix=true")).reason).toMatch(/a\/ and b\/ prefixes/);
    expect(refusal(repo.diff("diff.noprefix=true")).reason).toMatch(/a\/ and b\/ prefixes/);
  });

  it("sees a symlink re-pointed out of the workspace although no mode line changes", async () => {
    await unlink(path.join(root, "inside"));
    await symlink("/etc/passwd", path.join(root, "inside"));
    await unlink(path.join(root, "sub", "link"));
    await symlink("../../outside", path.join(root, "sub", "link"));
    const patch = repo.diff();
    expect(patch.toString()).not.toMatch(/mode/);
    const files = parsePatch(patch);
    expect(summary(files).map((f) => f.target)).toEqual(["/etc/passwd", "../../outside"]);
    expect(patchProblems(files)).toEqual([
      {
        path: "inside",
        problem:
          "is a symlink that leads out of the workspace: inside -> /etc/passwd leaves the workspace",
      },
      {
        path: "sub/link",
        problem:
          "is a symlink that leads out of the workspace: sub/link -> ../../outside leaves the workspace",
      },
    ]);
  });

  it("reads a symlink target from a binary hunk, and refuses one it cannot read", async () => {
    // A hand-made patch: git's binary literal of "/etc/passwd", relabelled as a new symlink.
    await repo.file(".gitattributes", "evil binary\n");
    await repo.file("evil", "/etc/passwd");
    const binary = repo
      .diff()
      .toString()
      .split(/(?=^diff --git )/m)
      .find((part) => part.startsWith("diff --git a/evil "));
    const hostile = binary?.replace("new file mode 100644", "new file mode 120000") ?? "";
    expect(hostile).toContain("GIT binary patch\nliteral 11\n");
    const files = parsePatch(hostile);
    expect(files[0]?.binary).toBe(true);
    expect(files[0]?.symlinkTarget).toBe("/etc/passwd");
    expect(patchProblems(files).map((p) => p.problem)).toEqual([
      expect.stringContaining("-> /etc/passwd leaves the workspace"),
    ]);

    // A delta needs the old target, which the patch does not carry: refused.
    const long = "x".repeat(4000);
    await repo.file("evil", `${long}1`);
    repo.git("add", "-A");
    repo.git("commit", "-qm", "long");
    await repo.file("evil", `${long}2`);
    const delta = repo.diff().toString();
    expect(delta).toContain("\ndelta ");
    expect(refusal(delta.replace(/ 100644\n/, " 120000\n")).reason).toMatch(/binary delta/);
    // As a plain binary file the same delta is fine.
    expect(parsePatch(delta)[0]?.binary).toBe(true);
  });
});

/** A small well-formed patch to break in the tests below. */
const modify = [
  "diff --git a/calc.py b/calc.py",
  "index 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 100644",
  "--- a/calc.py",
  "+++ b/calc.py",
  "@@ -1,2 +1,2 @@",
  " def add(a, b):",
  "-    return a - b",
  "+    return a + b",
  "",
].join("\n");

describe("parsePatch: hostile patches", () => {
  it("accepts the well-formed patch", () => {
    expect(summary(parsePatch(modify))).toEqual([
      { path: "calc.py", change: "modified", mode: "100644", target: undefined },
    ]);
  });

  it.each([
    ["--- a/calc.py", "--- a/other.py", /`---` line names "a\/other.py"/],
    ["+++ b/calc.py", "+++ b/tests/test_calc.py", /`\+\+\+` line names/],
    ["+++ b/calc.py", "+++ /dev/null", /`\+\+\+` line names/],
    ["diff --git a/calc.py b/calc.py", "diff --git a/calc.py b/other.py", /a\/<path> b\/<path>/],
    ["diff --git a/calc.py b/calc.py", "diff --git i/calc.py w/calc.py", /prefixes/],
    ["@@ -1,2 +1,2 @@", "@@ -1,3 +1,3 @@", /ends before its line counts/],
    ["@@ -1,2 +1,2 @@", "@@ -1,1 +1,1 @@", /outside any hunk/],
    ["@@ -1,2 +1,2 @@", "@@ -1,2 +1,1 @@", /outside any hunk/],
    ["@@ -1,2 +1,2 @@", "@@ -1,2 +1,2", /not `@@ -a,b \+c,d @@`/],
    [" 100644\n", " 100600\n", /not a file mode git writes/],
    [" 100644\n", "\n", /does not say the file's mode/],
    [" 100644\n", " 100644\nindex 3..4\n", /second "index" line/],
    [" 100644\n", " 100644\nsimilarity index 90%\n", /neither renamed nor copied/],
    ["index 1111", "old mode 100644\nnew mode 120000\nindex 1111", /mode/],
    [" def add", "\n def add", /does not match its line counts/],
    ["--- a/calc.py", "frobnicate yes\n--- a/calc.py", /"frobnicate yes" is not a header/],
    ["--- a/calc.py\n+++ b/calc.py\n@@", "--- a/calc.py\n@@", /expected a `\+\+\+` line/],
  ])("refuses %j changed to %j", (from, to, reason) => {
    expect(modify).toContain(from);
    expect(refusal(modify.replace(from, to)).reason).toMatch(reason);
  });

  it("refuses a hunk whose counts hide a second file's headers inside it", () => {
    // Counts that cover the next file: its `diff --git` would be read as a content line.
    const hidden = modify.replace("@@ -1,2 +1,2 @@", "@@ -1,2 +1,6 @@") + modify;
    expect(refusal(hidden).reason).toMatch(/does not match its line counts at "diff --git/);
    // Extra lines after the counts are not content and not headers.
    expect(refusal(`${modify}+sneaked in\n`).reason).toMatch(/outside any hunk/);
  });

  it("refuses a patch that is not whole, or not git's binary encoding", () => {
    expect(refusal(modify.slice(0, -1)).reason).toMatch(/no newline/);
    const binary = [
      "diff --git a/x.bin b/x.bin",
      "new file mode 100644",
      "index 0000000000000000000000000000000000000000..bf30bca55fc724714a058572ba97c5686dbbaa21",
      "GIT binary patch",
      "literal 4",
      "LcmYew%wqrm1ET>t",
      "",
      "literal 0",
      "HcmV?d00001",
      "",
      "",
    ].join("\n");
    expect(parsePatch(binary)[0]?.binary).toBe(true);
    expect(refusal(binary.replace("literal 4", "literal 5")).reason).toMatch(/inflate/);
    expect(refusal(binary.replace("LcmYew", "McmYew")).reason).toMatch(/length letter/);
    expect(refusal(binary.replace("LcmYew", 'Lcm"ew')).reason).toMatch(/base85/);
    expect(refusal(binary.replace("t\n\nliteral 0", "t\n")).reason).toMatch(/expected|cut short/);
    expect(refusal(binary.replace("GIT binary patch\n", "Binary files differ\n")).reason).toMatch(
      /without its content/,
    );
  });

  it("refuses a symlink whose whole new target is not shown, or that turns from a file in place", () => {
    const link = (hunk: string[]) =>
      [
        "diff --git a/l b/l",
        "new file mode 120000",
        "index 0000000000000000000000000000000000000000..1111111111111111111111111111111111111111",
        "--- /dev/null",
        "+++ b/l",
        ...hunk,
        "",
      ].join("\n");
    const ok = link(["@@ -0,0 +1 @@", "+ok", "\\ No newline at end of file"]);
    expect(parsePatch(ok)[0]?.symlinkTarget).toBe("ok");
    expect(refusal(link(["@@ -0,0 +1,2 @@", "+ok", "+/etc/passwd"])).reason).toMatch(
      /whole new target/,
    );
    expect(refusal(link(["@@ -0,0 +1 @@", "+ok"])).reason).toMatch(/whole new target/);
    const empty = link([]).replace("--- /dev/null\n+++ b/l\n", "");
    expect(patchProblems(parsePatch(empty))[0]?.problem).toBe("is a symlink with an empty target");
  });

  it("refuses submodules added or moved, the mode read from the index line", () => {
    const gitlink = (header: string[]) =>
      [
        "diff --git a/vendor/lib b/vendor/lib",
        ...header,
        "--- a/vendor/lib",
        "+++ b/vendor/lib",
        "@@ -1 +1 @@",
        "-Subproject commit 1111111111111111111111111111111111111111",
        "+Subproject commit 2222222222222222222222222222222222222222",
        "",
      ].join("\n");
    const moved = gitlink([
      "index 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 160000",
    ]);
    expect(patchProblems(parsePatch(moved)).map((p) => p.problem)).toEqual([
      "changes a submodule (a nested git repository): make that change in the submodule",
    ]);
  });

  it("checks names from rename and copy headers, and .git in any spelling", () => {
    const rename = (from: string, to: string) =>
      [
        `diff --git a/${from} b/${to}`,
        "similarity index 100%",
        `rename from ${from}`,
        `rename to ${to}`,
        "",
      ].join("\n");
    expect(parsePatch(rename("a.txt", "b.txt"))[0]).toMatchObject({ from: "a.txt", path: "b.txt" });
    expect(
      refusal(rename("a.txt", "b.txt").replace("rename to b.txt", "rename to c.txt")).reason,
    ).toMatch(/does not name the rename/);
    const problems = [
      "x/.GIT/config",
      ".git./hooks/x",
      ".g\u200cit/hooks/x",
      "git~1/config",
      "a/../../x",
      "a//b",
    ].map((name) => patchProblems(parsePatch(rename("a.txt", name)))[0]?.problem);
    expect(problems).toEqual([
      "the path is inside .git",
      "the path is inside .git",
      "the path is inside .git",
      "the path is inside .git",
      "the path leaves the workspace",
      "the path is not in canonical form (empty or `.` components)",
    ]);
  });
});
