import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { readRepositoryLinks } from "./repository-links.js";

describe("readRepositoryLinks reads the workspace's links and never follows one", () => {
  let root: string;
  let repo: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-links-"));
    repo = path.join(root, "repo");
    const outside = path.join(root, "outside");
    await mkdir(path.join(repo, "a", "b"), { recursive: true });
    await mkdir(path.join(repo, ".git", "hooks"), { recursive: true });
    await mkdir(outside);
    await symlink("..", path.join(repo, "a", "x"));
    await symlink("../x", path.join(repo, "a", "b", "up"));
    await writeFile(path.join(repo, "a", "file"), "x");
    await symlink("/etc", path.join(repo, ".git", "hooks", "etc"));
    // A link out of the workspace whose far side holds a link of its own.
    await symlink(outside, path.join(repo, "out"));
    await symlink("/", path.join(outside, "root"));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("answers the target of a link, nothing for the rest", () => {
    const links = readRepositoryLinks(repo);
    expect(links.target("a/x")).toBe("..");
    expect(links.target("a/b/up")).toBe("../x");
    expect(["a", "a/file", "a/missing", "a/file/below"].map(links.target)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });

  it("does not look beyond a link: what lies past `out` is not the workspace's", () => {
    const links = readRepositoryLinks(repo);
    expect(links.target("out")).toBe(path.join(root, "outside"));
    expect(links.target("out/root")).toBeUndefined();
    expect(links.target("a/x/out")).toBeUndefined();
  });

  it("lists every link outside .git, without walking into any", () => {
    expect(readRepositoryLinks(repo).all()).toEqual(["a/b/up", "a/x", "out"]);
  });
});
