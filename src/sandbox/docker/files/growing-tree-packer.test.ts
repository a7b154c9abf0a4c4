import { mkdir, mkdtemp, rm, symlink, unlink, writeFile, chmod } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { extract, pack, type Pack } from "tar-stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { GrowingTreePacker, packTree } from "./tree-transfer.js";

interface Extracted {
  type: string;
  mode: number;
  uid: number;
  linkname: string | null;
  content: string;
}

/** Waits until the bytes packed so far hold `name` (the packer took it). */
async function packedSoFar(chunks: Buffer[], name: string): Promise<void> {
  for (let waited = 0; !Buffer.concat(chunks).includes(name); waited += 1) {
    if (waited > 1000) throw new Error(`the packer never packed ${name}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** What extracting the tar leaves: the last entry of each path wins, as in docker's and GNU tar. */
async function extracted(
  archive: Pack,
  write: () => Promise<void>,
  chunks: Buffer[] = [],
): Promise<Map<string, Extracted>> {
  archive.on("data", (chunk: unknown) => chunks.push(chunk as Buffer));
  const ended = new Promise((resolve, reject) => {
    archive.on("end", () => resolve(undefined));
    archive.on("error", reject);
  });
  await write();
  archive.finalize();
  await ended;
  const tree = new Map<string, Extracted>();
  const reader = extract();
  const done = new Promise<void>((resolve, reject) => {
    reader.on("finish", resolve);
    reader.on("error", reject);
  });
  reader.on("entry", (header, stream, next) => {
    const parts: Buffer[] = [];
    stream.on("data", (part: unknown) => parts.push(part as Buffer));
    stream.on("end", () => {
      tree.set(header.name, {
        type: header.type ?? "file",
        mode: header.mode ?? 0,
        uid: header.uid ?? 0,
        linkname: header.linkname ?? null,
        content: Buffer.concat(parts).toString("utf8"),
      });
      next();
    });
  });
  reader.end(Buffer.concat(chunks));
  await done;
  return tree;
}

describe("GrowingTreePacker", () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-growing-"));
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  const owner = { uid: 1000, gid: 1000 };
  const rootEntry = { name: "workspace", type: "directory" as const, mode: 0o755, ...owner };

  it("leaves what packTree of the finished tree leaves, whatever was named while it grew", async () => {
    const archive = pack();
    const chunks: Buffer[] = [];
    const packer = new GrowingTreePacker(archive, { prefix: "workspace/", owner, rootEntry });
    const grown = await extracted(
      archive,
      async () => {
        await mkdir(path.join(root, "src"));
        packer.add(root, "src");
        await writeFile(path.join(root, "src", "a.ts"), "first\n");
        packer.add(root, "src/a.ts");
        await writeFile(path.join(root, "run.sh"), "#!/bin/sh\n", { mode: 0o755 });
        packer.add(root, "run.sh");
        await symlink("src/a.ts", path.join(root, "link"));
        packer.add(root, "link");
        // Packed before the tree changes under it.
        await packedSoFar(chunks, "workspace/link");
        // Rewritten after it was named (cordon writes .git/config so), and never named at all.
        await writeFile(path.join(root, "src", "a.ts"), "second, longer\n");
        await chmod(path.join(root, "run.sh"), 0o700);
        await mkdir(path.join(root, ".git"));
        await writeFile(path.join(root, ".git", "config"), "[core]\n");
        await packer.finish(root);
      },
      chunks,
    );
    const whole = pack();
    const expected = await extracted(whole, async () => {
      await packTree(whole, root, { prefix: "workspace/", owner });
    });
    expected.set("workspace", {
      type: "directory",
      mode: 0o755,
      uid: 1000,
      linkname: null,
      content: "",
    });
    expect(grown).toEqual(expected);
    expect(grown.get("workspace/src/a.ts")?.content).toBe("second, longer\n");
    expect(grown.get("workspace/link")?.linkname).toBe("src/a.ts");
  });

  it("refuses a tree that lost an entry it packed (extraction would keep it)", async () => {
    const archive = pack();
    const chunks: Buffer[] = [];
    archive.on("data", (chunk: unknown) => chunks.push(chunk as Buffer));
    const packer = new GrowingTreePacker(archive, { prefix: "workspace/", owner, rootEntry });
    await writeFile(path.join(root, "gone.txt"), "x\n");
    packer.add(root, "gone.txt");
    await packedSoFar(chunks, "workspace/gone.txt");
    await unlink(path.join(root, "gone.txt"));
    await expect(packer.finish(root)).rejects.toThrow(/workspace\/gone.txt was packed/);
  });
});
