import { mkdir, mkdtemp, readFile, realpath, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { TreeCopier } from "./tree-copy.js";

describe("TreeCopier.copyEntries", () => {
  let root: string;
  let source: string;
  let target: string;

  beforeEach(async () => {
    root = await realpath(await mkdtemp(path.join(tmpdir(), "cordon-tree-copy-")));
    source = path.join(root, "source");
    target = path.join(root, "target");
    await mkdir(source);
    await mkdir(target);
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("leaves out, without a warning, listed entries whose directory was deleted; a parent that leads out is still named", async () => {
    await writeFile(path.join(source, "kept.txt"), "kept\n");
    await mkdir(path.join(root, "outside"));
    await writeFile(path.join(root, "outside", "secret"), "SECRET\n");
    await symlink(path.join(root, "outside"), path.join(source, "out"));
    const copier = new TreeCopier({ sourceRoot: source, targetRoot: target });

    // git lists tracked files the user deleted (`rm -r build-output`) until the deletion is
    // committed: they are not in the work tree, so not in the copy, and nothing is wrong.
    const summary = await copier.copyEntries([
      "kept.txt",
      "build-output/report.json",
      "build-output/nested/log.txt",
      "out/secret",
    ]);

    expect(await readFile(path.join(target, "kept.txt"), "utf8")).toBe("kept\n");
    expect(summary.files).toBe(1);
    expect(summary.skipped).toEqual([
      { path: "out/secret", reason: "a parent directory leads outside the workspace" },
    ]);
  });
});
