import { lstat, mkdtemp, readFile, readdir, readlink, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { pack, type Header } from "tar-stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { SandboxError } from "../../../common/index.js";
import { extractArchive } from "./archive-extract.js";

type Entry = Partial<Header> & { name: string; content?: string };

/** A tar stream with exactly these entries, as a hostile container could send it. */
async function* archiveOf(entries: Entry[]): AsyncIterable<Uint8Array> {
  const archive = pack();
  for (const { content, ...header } of entries) {
    if (content !== undefined)
      archive.entry({ ...header, size: Buffer.byteLength(content) }, content);
    else archive.entry(header);
  }
  archive.finalize();
  for await (const chunk of archive) yield chunk as Uint8Array;
}

describe("extractArchive", () => {
  let base: string;
  let staging: string;

  beforeEach(async () => {
    base = await mkdtemp(path.join(tmpdir(), "cordon-extract-"));
    staging = path.join(base, "staging");
    await import("node:fs/promises").then((fs) => fs.mkdir(staging));
  });

  afterEach(async () => {
    await rm(base, { recursive: true, force: true });
  });

  async function refusal(entries: Entry[], limits = {}): Promise<string> {
    const error = await extractArchive(archiveOf(entries), staging, limits).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(SandboxError);
    return (error as SandboxError).message;
  }

  it("extracts directories, files, hard links and inward symlinks", async () => {
    const result = await extractArchive(
      archiveOf([
        { name: "./", type: "directory" },
        { name: "./src/", type: "directory", mode: 0o755 },
        { name: "./src/main.ts", content: "export {};\n", mode: 0o644 },
        { name: "./bin/run", content: "#!/bin/sh\n", mode: 0o4755 },
        { name: "./src/again.ts", type: "link", linkname: "src/main.ts" },
        { name: "./link", type: "symlink", linkname: "src/main.ts" },
        { name: "./src/up", type: "symlink", linkname: "../bin/run" },
      ]),
      staging,
    );
    expect(result).toEqual({ entries: 6, bytes: 21 });
    expect(await readFile(path.join(staging, "src/again.ts"), "utf8")).toBe("export {};\n");
    expect(await readlink(path.join(staging, "link"))).toBe("src/main.ts");
    // setuid and friends are dropped.
    expect((await lstat(path.join(staging, "bin/run"))).mode & 0o7777).toBe(0o755);
  });

  it.each([
    [[{ name: "/etc/passwd", content: "x" }], /absolute name/],
    [[{ name: "../escape.txt", content: "x" }], /'\.\.'/],
    [[{ name: "a/../../escape.txt", content: "x" }], /'\.\.'/],
    [[{ name: "etc", type: "symlink", linkname: "/etc" }] as Entry[], /absolute path/],
    [[{ name: "up", type: "symlink", linkname: "../.." }] as Entry[], /leaving the tree/],
    [[{ name: "a/b", type: "symlink", linkname: "../../x" }] as Entry[], /leaving the tree/],
    [
      [{ name: "null", type: "character-device", devmajor: 1, devminor: 3 }] as Entry[],
      /character-device/,
    ],
    [[{ name: "fifo", type: "fifo" }] as Entry[], /fifo/],
    [[{ name: "hard", type: "link", linkname: "../../etc/passwd" }] as Entry[], /'\.\.'/],
    [[{ name: "hard", type: "link", linkname: "not-there" }] as Entry[], /not an earlier file/],
  ])("refuses %j", async (entries, message) => {
    expect(await refusal(entries)).toMatch(message);
  });

  it("refuses writing through a symlink an earlier entry made", async () => {
    const message = await refusal([
      { name: "dir", type: "symlink", linkname: "." },
      { name: "dir/file.txt", content: "through the link" },
    ]);
    expect(message).toMatch(/lies under "dir", which is a symlink/);
  });

  it("refuses a chain of links that leaves the tree though each stays inside on its own", async () => {
    const message = await refusal([
      { name: "a/", type: "directory" },
      { name: "a/here", type: "symlink", linkname: "." },
      { name: "a/out", type: "symlink", linkname: "here/../.." },
    ]);
    // a/here/../.. is "." lexically, but here → a, so the kernel lands one level above the tree.
    expect(message).toMatch(/resolves outside the tree/);
  });

  it("refuses a duplicate entry instead of overwriting", async () => {
    expect(
      await refusal([
        { name: "f", content: "one" },
        { name: "f", content: "two" },
      ]),
    ).toMatch(/appears twice/);
  });

  it("holds the byte and entry caps", async () => {
    expect(await refusal([{ name: "big", content: "x".repeat(100) }], { maxBytes: 99 })).toMatch(
      /limit of 99 bytes/,
    );
    expect(
      await refusal(
        [
          { name: "a", content: "" },
          { name: "b", content: "" },
          { name: "c", content: "" },
        ],
        { maxEntries: 2 },
      ),
    ).toMatch(/limit of 2 entries/);
  });

  it("writes nothing outside the staging directory whatever it refused", async () => {
    await refusal([
      { name: "ok.txt", content: "fine" },
      { name: "../escape.txt", content: "x" },
    ]);
    expect((await readdir(base)).sort()).toEqual(["staging"]);
  });
});
