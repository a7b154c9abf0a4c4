import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { deflateSync } from "node:zlib";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { packLooseObjects, type LooseObject } from "./loose-object-pack.js";

let root: string;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "cordon-pack-"));
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const git = (cwd: string, ...args: string[]): string =>
  execFileSync(
    "git",
    ["-c", "user.name=t", "-c", "user.email=t@e", "-c", "safe.directory=*", ...args],
    { cwd, encoding: "utf8" },
  );

/** A repository of loose objects only: commits of files big and small, a tag, an empty blob. */
async function makeLooseRepository(directory: string, objectFormat: "sha1" | "sha256") {
  await mkdir(directory);
  git(directory, "init", "-q", `--object-format=${objectFormat}`);
  for (let commit = 0; commit < 3; commit += 1) {
    await mkdir(path.join(directory, "src", `m${commit}`), { recursive: true });
    for (let file = 0; file < 20; file += 1) {
      await writeFile(
        path.join(directory, "src", `m${commit}`, `f${file}.ts`),
        `// ${commit} ${file}\n${"x".repeat(file * 97 * (commit + 1))}\n`,
      );
    }
    await writeFile(path.join(directory, "empty"), "");
    git(directory, "add", "-A");
    git(directory, "commit", "-qm", `commit ${commit}`);
  }
  git(directory, "tag", "-a", "v1", "-m", "a tag");
}

async function looseObjects(repository: string): Promise<LooseObject[]> {
  const objects = path.join(repository, ".git", "objects");
  const found: LooseObject[] = [];
  for (const dir of await readdir(objects)) {
    if (!/^[0-9a-f]{2}$/.test(dir)) continue;
    for (const file of await readdir(path.join(objects, dir))) {
      found.push({ relative: `.git/objects/${dir}/${file}`, id: `${dir}${file}` });
    }
  }
  return found;
}

/** An empty repository of `format` whose objects are only what was packed into it. */
async function emptyRepository(directory: string, objectFormat: "sha1" | "sha256") {
  await mkdir(directory);
  git(directory, "init", "-q", "--bare", `--object-format=${objectFormat}`);
  return path.join(directory, "objects", "pack");
}

describe("packLooseObjects", () => {
  for (const format of ["sha1", "sha256"] as const) {
    it(`packs every loose object of a ${format} repository into a pack git reads and verifies`, async () => {
      const source = path.join(root, "source");
      await makeLooseRepository(source, format);
      const objects = await looseObjects(source);
      expect(objects.length).toBeGreaterThan(60);
      const target = path.join(root, "target.git");
      const packDirectory = await emptyRepository(target, format);

      const packed = await packLooseObjects({
        sourceRoot: source,
        objects,
        targetDirectory: packDirectory,
        hash: format,
        owner: undefined,
      });

      expect(packed.left).toEqual([]);
      expect(packed.files).toHaveLength(2);
      expect(packed.files[0]).toMatch(/^pack-[0-9a-f]+\.pack$/);
      // git's own checks: every entry's CRC and hash, the index against the pack.
      const index = path.join(packDirectory, packed.files[1] ?? "");
      const verified = git(target, "verify-pack", "-v", index);
      expect(verified).toMatch(new RegExp(`non delta: ${objects.length} objects`));
      expect(git(target, "fsck", "--strict", "--no-dangling")).toBe("");
      // The same history, read from the pack.
      const head = git(source, "rev-parse", "HEAD").trim();
      expect(git(target, "log", "--format=%s", head)).toBe("commit 2\ncommit 1\ncommit 0\n");
      expect(git(target, "cat-file", "-p", `${head}:src/m2/f19.ts`)).toBe(
        git(source, "cat-file", "-p", `${head}:src/m2/f19.ts`),
      );
      expect(git(target, "cat-file", "-t", git(source, "rev-parse", "v1").trim())).toBe("tag\n");
    });
  }

  it("leaves for copying what is not what its name says, a link, or unreadable as an object", async () => {
    const source = path.join(root, "source");
    await makeLooseRepository(source, "sha1");
    const objects = await looseObjects(source);
    const [good, renamed, linked] = objects;
    if (!good || !renamed || !linked) throw new Error("too few objects");
    // An object whose bytes hash to something else than its name.
    const wrongId = `${"0".repeat(39)}1`;
    const wrong = {
      relative: `.git/objects/00/${wrongId.slice(2)}`,
      id: wrongId,
    };
    await mkdir(path.join(source, ".git", "objects", "00"), { recursive: true });
    await writeFile(
      path.join(source, wrong.relative),
      await readFile(path.join(source, renamed.relative)),
    );
    // Garbage that is no zlib stream, and a header that lies about its size.
    const garbage = { relative: ".git/objects/00/garbage", id: `${"0".repeat(38)}ff` };
    await writeFile(path.join(source, garbage.relative), "not zlib");
    const lying = { relative: ".git/objects/00/lying", id: `${"0".repeat(38)}ee` };
    await writeFile(path.join(source, lying.relative), deflateSync(Buffer.from("blob 99\0short")));
    // A link to a file outside the source is never followed.
    const outside = path.join(root, "outside");
    await writeFile(outside, await readFile(path.join(source, linked.relative)));
    const link = { relative: ".git/objects/00/link", id: linked.id };
    await symlink(outside, path.join(source, link.relative));

    const packDirectory = await emptyRepository(path.join(root, "target.git"), "sha1");
    const packed = await packLooseObjects({
      sourceRoot: source,
      objects: [good, wrong, garbage, lying, link],
      targetDirectory: packDirectory,
      hash: "sha1",
      owner: undefined,
    });
    expect(packed.left.map((o) => o.relative).sort()).toEqual(
      [wrong, garbage, lying, link].map((o) => o.relative).sort(),
    );
    const verified = git(
      path.join(root, "target.git"),
      "verify-pack",
      "-v",
      path.join(packDirectory, packed.files[1] ?? ""),
    );
    expect(verified).toContain(good.id);
    expect(verified).toMatch(/non delta: 1 object/);
  });

  it("writes nothing when nothing can be packed", async () => {
    const packDirectory = await emptyRepository(path.join(root, "target.git"), "sha1");
    const packed = await packLooseObjects({
      sourceRoot: root,
      objects: [{ relative: "missing", id: "0".repeat(40) }],
      targetDirectory: packDirectory,
      hash: "sha1",
      owner: undefined,
    });
    expect(packed).toEqual({
      files: [],
      bytes: 0,
      left: [{ relative: "missing", id: "0".repeat(40) }],
    });
    expect(await readdir(packDirectory)).toEqual([]);
  });
});
