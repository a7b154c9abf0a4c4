import { mkdtemp, readFile, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { writeFileAtomically } from "./atomic-file.js";

describe("writeFileAtomically", () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-atomic-"));
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  it("makes the directory, writes with the mode asked for and leaves no temporary file", async () => {
    const file = path.join(root, "records", "a.json");
    await writeFileAtomically(file, "{}\n", { mode: 0o600 });
    expect(await readFile(file, "utf8")).toBe("{}\n");
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await readdir(path.dirname(file))).toEqual(["a.json"]);
  });

  it("of many writers at once, the file holds one whole content", async () => {
    const file = path.join(root, "record.json");
    const contents = Array.from({ length: 20 }, (_, i) => `${String(i).repeat(50_000)}\n`);
    await Promise.all(contents.map((c) => writeFileAtomically(file, c, { mode: 0o600 })));
    expect(contents).toContain(await readFile(file, "utf8"));
    expect(await readdir(root)).toEqual(["record.json"]);
  });

  it("a failed write leaves the old file and no temporary one", async () => {
    const file = path.join(root, "record.json");
    await writeFileAtomically(file, "old\n", { mode: 0o600 });
    // A directory where the file is: the rename fails.
    const blocked = path.join(root, "dir");
    await writeFileAtomically(path.join(blocked, "x"), "x", { mode: 0o600 });
    await expect(writeFileAtomically(blocked, "new", { mode: 0o600 })).rejects.toThrow();
    expect(await readFile(file, "utf8")).toBe("old\n");
    expect((await readdir(root)).sort()).toEqual(["dir", "record.json"]);
  });
});
