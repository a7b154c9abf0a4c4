import { execFileSync, spawnSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { PolicyDeniedError } from "../common/index.js";
import { applyChanges } from "./apply-changes.js";

const gitEnv = {
  ...process.env,
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_AUTHOR_NAME: "t",
  GIT_AUTHOR_EMAIL: "t@t",
  GIT_COMMITTER_NAME: "t",
  GIT_COMMITTER_EMAIL: "t@t",
};

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, { cwd, env: gitEnv, encoding: "utf8" });
}

const editPy = Buffer.from(
  [
    "diff --git a/app.py b/app.py",
    "index 7d4290a117a4ddcc11daae7ea675841033830c8f..b95c23a4d31624aed5394c24e8189a128d2775d1 100644",
    "--- a/app.py",
    "+++ b/app.py",
    "@@ -1 +1 @@",
    "-x = 1",
    "+x = 3",
    "",
  ].join("\n"),
);

describe("applyChanges runs none of the repository's code", () => {
  let root: string;
  let repo: string;
  let markers: string;

  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-apply-"));
    repo = path.join(root, "repo");
    markers = path.join(root, "markers");
    await mkdir(repo);
    await mkdir(markers);
    git(repo, "init", "-q");
    await writeFile(path.join(repo, "app.py"), "x = 1\n");
    // What a hostile repository (or an rw agent) leaves in the user's real repository: a filter
    // for every .py, crlf conversion, an fsmonitor and every hook, each leaving a marker file.
    await writeFile(path.join(repo, ".gitattributes"), "*.py filter=x text eol=crlf ident\n");
    const mark = (name: string) => `touch ${path.join(markers, name)}`;
    git(repo, "config", "filter.x.clean", `${mark("clean")}; cat`);
    git(repo, "config", "filter.x.smudge", `${mark("smudge")}; cat`);
    git(repo, "config", "filter.x.required", "true");
    git(repo, "config", "core.fsmonitor", mark("fsmonitor"));
    const hooks = path.join(repo, ".git", "hooks");
    for (const hook of [
      "pre-applypatch",
      "post-applypatch",
      "post-index-change",
      "post-checkout",
    ]) {
      await writeFile(path.join(hooks, hook), `#!/bin/sh\n${mark(hook)}\n`, { mode: 0o755 });
    }
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("the attack works with plain git apply: the repository's filter runs on the host", async () => {
    const plain = spawnSync("git", ["apply", "-"], { cwd: repo, env: gitEnv, input: editPy });
    expect(plain.status).toBe(0);
    expect((await readdir(markers)).sort()).toEqual(["clean", "smudge"]);
  });

  it("applyChanges applies the same patch byte for byte and runs nothing", async () => {
    const outcome = await applyChanges(repo, editPy);
    expect(outcome.applied).toBe(true);
    expect(await readdir(markers)).toEqual([]);
    // No crlf, no ident: exactly the bytes of the patch.
    expect(await readFile(path.join(repo, "app.py"), "utf8")).toBe("x = 3\n");
  });
});

describe("applyChanges checks what only the workspace shows", () => {
  let root: string;
  let repo: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-apply-"));
    repo = path.join(root, "repo");
    await mkdir(path.join(repo, "sub"), { recursive: true });
    await writeFile(path.join(repo, "code.py"), "x\n");
    await symlink("../code.py", path.join(repo, "sub", "link"));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("refuses a symlink moved as is to where its relative target leaves the workspace", async () => {
    // git writes a pure rename with no mode: `../code.py` from the top is outside.
    const rename = [
      "diff --git a/sub/link b/link",
      "similarity index 100%",
      "rename from sub/link",
      "rename to link",
      "",
    ].join("\n");
    const failure = await applyChanges(repo, Buffer.from(rename)).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(PolicyDeniedError);
    expect((failure as Error).message).toContain(
      "link is a symlink that leads out of the workspace: link -> ../code.py leaves the workspace",
    );
    expect(await readdir(repo)).toEqual(["code.py", "sub"]);
    // The same move of a plain file is fine.
    const file = rename.replaceAll("sub/link", "code.py").replace("b/link", "b/moved.py");
    const moved = file.replace("rename to link", "rename to moved.py");
    expect((await applyChanges(repo, Buffer.from(moved))).applied).toBe(true);
  });

  it("refuses a link the patch adds that leaves through a link the workspace has", async () => {
    // The workspace's own `a/x -> ..` is inside (the root); the patch's `l` climbs one more level.
    await mkdir(path.join(repo, "a"));
    await symlink("..", path.join(repo, "a", "x"));
    await writeFile(path.join(root, "victim"), "the user's\n");
    const attack = [
      "diff --git a/l b/l",
      "new file mode 120000",
      "index 0000000000000000000000000000000000000000..1111111111111111111111111111111111111111",
      "--- /dev/null",
      "+++ b/l",
      "@@ -0,0 +1 @@",
      "+a/x/../victim",
      "\\ No newline at end of file",
      "",
    ].join("\n");
    const failure = await applyChanges(repo, Buffer.from(attack)).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(PolicyDeniedError);
    expect((failure as Error).message).toContain(
      "l is a symlink that leads out of the workspace: l -> a/x/../victim: a/x -> .. leaves the workspace",
    );
    expect(await readdir(repo)).toEqual(["a", "code.py", "sub"]);
    expect(await readFile(path.join(root, "victim"), "utf8")).toBe("the user's\n");
    // The agent's bytes in the refusal are shown, not sent to the terminal.
    const escaping = attack.replace("+a/x/../victim", "+../\u001b[2J");
    const shown = await applyChanges(repo, Buffer.from(escaping)).catch((error: unknown) => error);
    expect((shown as Error).message).toContain("l -> ../\\u001b[2J leaves the workspace");
    expect((shown as Error).message).not.toContain("\u001b");
    // The same link with `a/x` a plain directory stays inside, and is applied.
    await rm(path.join(repo, "a", "x"));
    await mkdir(path.join(repo, "a", "x"));
    expect((await applyChanges(repo, Buffer.from(attack))).applied).toBe(true);
  });

  it("refuses writing through a symlink that leads out, and keeps git's refusal of one that stays in", async () => {
    const outside = path.join(root, "outside");
    await mkdir(outside);
    await symlink(outside, path.join(repo, "out"));
    const through = [
      "diff --git a/out/planted.txt b/out/planted.txt",
      "new file mode 100644",
      "index 0000000000000000000000000000000000000000..78981922613b2afb6025042ff6bd878ac1994e85",
      "--- /dev/null",
      "+++ b/out/planted.txt",
      "@@ -0,0 +1 @@",
      "+a",
      "",
    ].join("\n");
    // cordon names the chain and refuses with its exit code (7) before git sees the patch.
    const failure = await applyChanges(repo, Buffer.from(through)).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(PolicyDeniedError);
    expect((failure as Error).message).toContain(
      `out/planted.txt is written through a symlink that leads out of the workspace: out -> ${outside} leaves the workspace`,
    );
    expect(await readdir(outside)).toEqual([]);
    // A link that stays inside: git's own refusal holds.
    await symlink("sub", path.join(repo, "in"));
    await expect(
      applyChanges(repo, Buffer.from(through.replaceAll("out/planted.txt", "in/planted.txt"))),
    ).rejects.toThrow(/beyond a symbolic link/);
    await rm(path.join(repo, "in"));

    // A symlink the patch itself adds (pointing inside, so it passes the checks) and a file
    // written through it in the same patch: refused as a whole.
    const ownLink = [
      "diff --git a/link b/link",
      "new file mode 120000",
      "index 0000000000000000000000000000000000000000..1111111111111111111111111111111111111111",
      "--- /dev/null",
      "+++ b/link",
      "@@ -0,0 +1 @@",
      "+sub",
      "\\ No newline at end of file",
      through.replaceAll("out/planted.txt", "link/planted.txt"),
    ].join("\n");
    await expect(applyChanges(repo, Buffer.from(ownLink))).rejects.toThrow(
      /beyond a symbolic link/,
    );
    expect(await readdir(repo)).toEqual(["code.py", "out", "sub"]);
    expect(await readdir(path.join(repo, "sub"))).toEqual(["link"]);
  });
});
