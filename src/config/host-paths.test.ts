import { mkdir, mkdtemp, realpath, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { hostPathOwner, hostRealpath } from "./host-paths.js";

let dir: string;

beforeAll(async () => {
  dir = await realpath(await mkdtemp(path.join(tmpdir(), "cordon-paths-")));
  await mkdir(path.join(dir, "target", "inner"), { recursive: true });
  await symlink(path.join(dir, "target"), path.join(dir, "link"));
  await symlink(path.join(dir, "nowhere"), path.join(dir, "dangling"));
  await symlink("/etc/cordon-test-not-there", path.join(dir, "to-etc"));
  await symlink(path.join(dir, "loop-b"), path.join(dir, "loop-a"));
  await symlink(path.join(dir, "loop-a"), path.join(dir, "loop-b"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("hostRealpath", () => {
  it("resolves symlinks of existing paths", () => {
    expect(hostRealpath(path.join(dir, "link", "inner"))).toBe(path.join(dir, "target", "inner"));
  });

  it("resolves a symlinked parent of a path that does not exist yet", () => {
    expect(hostRealpath(path.join(dir, "link", "new", "file"))).toBe(
      path.join(dir, "target", "new", "file"),
    );
  });

  it("normalises .. and // before resolving", () => {
    expect(hostRealpath(`${dir}//link/inner/../inner`)).toBe(path.join(dir, "target", "inner"));
  });

  it("follows a dangling link to where it points, as a later mount would", () => {
    expect(hostRealpath(path.join(dir, "dangling", "x"))).toBe(path.join(dir, "nowhere", "x"));
    expect(hostRealpath(path.join(dir, "to-etc"))).toBe("/etc/cordon-test-not-there");
  });

  it("gives up on a link loop without hanging", () => {
    expect(hostRealpath(path.join(dir, "loop-a", "x"))).toMatch(/loop-[ab]\/x$/);
  });
});

describe("hostPathOwner", () => {
  it("reads the owner, or undefined for a missing path", () => {
    expect(hostPathOwner(dir)).toEqual({ uid: process.getuid?.(), gid: process.getgid?.() });
    expect(hostPathOwner(path.join(dir, "missing"))).toBeUndefined();
  });
});
