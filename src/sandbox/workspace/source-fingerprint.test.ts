import { chmod, mkdir, mkdtemp, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { SourceFingerprint } from "./source-fingerprint.js";

describe("SourceFingerprint", () => {
  let root: string;

  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-fingerprint-"));
    await mkdir(path.join(root, "src"));
    await writeFile(path.join(root, "src", "a.txt"), "a\n");
    await symlink("/etc/passwd", path.join(root, "link"));
    await mkdir(path.join(root, ".cordon"));
  });

  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  async function ofTree(exclude: string[] = []): Promise<string> {
    const fingerprint = new SourceFingerprint(root, exclude);
    await fingerprint.addTree("");
    return fingerprint.digest();
  }

  it("is the same for an unchanged tree", async () => {
    expect(await ofTree()).toBe(await ofTree());
  });

  it("changes with a write that keeps size and mtime (ctime moves), a mode change and a new file", async () => {
    const file = path.join(root, "src", "a.txt");
    const before = await ofTree();
    await writeFile(file, "b\n");
    await utimes(file, new Date(0), new Date(0));
    const written = await ofTree();
    expect(written).not.toBe(before);
    await chmod(file, 0o600);
    const moded = await ofTree();
    expect(moded).not.toBe(written);
    await writeFile(path.join(root, "src", "b.txt"), "");
    expect(await ofTree()).not.toBe(moded);
  });

  it("counts a link as a link (never follows it) and leaves excluded paths out", async () => {
    const excluded = [path.join(root, ".cordon")];
    const before = await ofTree(excluded);
    await writeFile(path.join(root, ".cordon", "session.jsonl"), "{}\n");
    expect(await ofTree(excluded)).toBe(before);
    expect(before.startsWith("4:")).toBe(true); // root, link, src, src/a.txt
  });

  it("lists a missing entry as missing rather than failing", async () => {
    const fingerprint = new SourceFingerprint(root, []);
    await fingerprint.addEntries(["src/a.txt", "gone.txt"]);
    const other = new SourceFingerprint(root, []);
    await other.addEntries(["src/a.txt"]);
    expect(fingerprint.digest()).not.toBe(other.digest());
  });
});
