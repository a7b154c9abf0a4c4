import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { pendingPathLocks } from "../path-lock.js";
import { MemorySandbox } from "../testing/memory-sandbox.js";
import { toolHarness } from "../testing/harness.js";
import { limits } from "./limits.js";

const hostileNames = [
  "with space.txt",
  'it\'s "quoted".txt',
  "new\nline.txt",
  "-leading-dash.txt",
  "--help",
  "ünïcødé ✓ 日本語.txt",
  "$(touch pwned).txt",
  "`id`.txt",
  "semi;colon&amp|pipe.txt",
  "back\\slash.txt",
  "*glob?[x].txt",
];

describe("read", () => {
  it("returns numbered lines", async () => {
    const sandbox = new MemorySandbox({ files: { "a.txt": "alpha\nbeta\ngamma\n" } });
    const { call, text } = toolHarness(sandbox);
    const result = await call("read", { path: "a.txt" });
    expect(result.isError).toBe(false);
    expect(text(result)).toBe("1\talpha\n2\tbeta\n3\tgamma");
  });

  it("pages with offset and limit and says how to continue", async () => {
    const body = Array.from({ length: 50 }, (_, i) => `row ${i + 1}`).join("\n");
    const sandbox = new MemorySandbox({ files: { "big.txt": body } });
    const { call, text } = toolHarness(sandbox);
    const page = text(await call("read", { path: "big.txt", offset: 10, limit: 5 }));
    expect(page).toBe(
      "10\trow 10\n11\trow 11\n12\trow 12\n13\trow 13\n14\trow 14\n[Showing lines 10-14 of 50. Continue with offset=15.]",
    );
    const end = text(await call("read", { path: "big.txt", offset: 49 }));
    expect(end).toBe("49\trow 49\n50\trow 50\n[Showing lines 49-50 of 50; end of file.]");
    const past = await call("read", { path: "big.txt", offset: 51 });
    expect(text(past)).toMatch(/has 50 lines; offset 51 is past the end/);
  });

  it("bounds a long file to the default line count and a huge line to its cut", async () => {
    const lines = Array.from({ length: limits.readLines + 500 }, (_, i) => `l${i + 1}`);
    lines[2] = "x".repeat(100_000);
    const sandbox = new MemorySandbox({ files: { "long.txt": lines.join("\n") } });
    const { call, text } = toolHarness(sandbox);
    const out = text(await call("read", { path: "long.txt" }));
    expect(out.length).toBeLessThan(limits.outputChars + 1000);
    expect(out).toMatch(/line cut: 100000 characters/);
    expect(out).toMatch(/\[Showing lines 1-\d+ of 2500\. Continue with offset=\d+\.\]/);
    expect(out).toMatch(/long line\(s\) were cut/);
  });

  it("stops at the output budget even within the line limit", async () => {
    const lines = Array.from({ length: 1000 }, (_, i) => `${i}:${"y".repeat(500)}`);
    const sandbox = new MemorySandbox({ files: { "wide.txt": lines.join("\n") } });
    const { call, text } = toolHarness(sandbox);
    const out = text(await call("read", { path: "wide.txt" }));
    expect(out.length).toBeLessThanOrEqual(limits.outputChars + 200);
    const shown = /Showing lines 1-(\d+) of 1000\. Continue with offset=(\d+)/.exec(out);
    expect(Number(shown?.[2])).toBe(Number(shown?.[1]) + 1);
  });

  it("shows CRLF files without carriage returns and drops the BOM", async () => {
    const sandbox = new MemorySandbox({ files: { "w.txt": "\uFEFFone\r\ntwo\r\n" } });
    const { call, text } = toolHarness(sandbox);
    expect(text(await call("read", { path: "w.txt" }))).toBe("1\tone\n2\ttwo");
  });

  it("says so for an empty file, a directory and a missing file", async () => {
    const sandbox = new MemorySandbox({ files: { "empty.txt": "", "dir/x": "1" } });
    const { call, text } = toolHarness(sandbox);
    expect(text(await call("read", { path: "empty.txt" }))).toMatch(/is empty/);
    const dir = await call("read", { path: "dir" });
    expect(dir.isError).toBe(true);
    expect(text(dir)).toMatch(/is a directory.*Use ls/);
    const missing = await call("read", { path: "nope.txt" });
    expect(missing.isError).toBe(true);
    expect(text(missing)).toBe(
      "/workspace/nope.txt does not exist. Use ls or find to see what exists.",
    );
  });

  it("refuses binary files with a note and returns images as image content", async () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]);
    const sandbox = new MemorySandbox({
      files: {
        "bin.dat": new Uint8Array([1, 2, 0, 3]),
        "latin1.txt": new Uint8Array([0x63, 0x61, 0x66, 0xe9]),
        "pic.png": png,
      },
    });
    const { call, text } = toolHarness(sandbox);
    const bin = await call("read", { path: "bin.dat" });
    expect(bin.isError).toBe(true);
    expect(text(bin)).toMatch(/binary file \(4 bytes\).*xxd/);
    expect((await call("read", { path: "latin1.txt" })).isError).toBe(true);
    const image = await call("read", { path: "pic.png" });
    expect(image.isError).toBe(false);
    expect(image.content[1]).toEqual({
      type: "image",
      mediaType: "image/png",
      dataBase64: Buffer.from(png).toString("base64"),
    });
  });

  it("reads a range of a file too large to load, cutting it out inside the sandbox", async () => {
    // A real file on disk, and a sandbox whose workdir is that directory and whose exec is bash.
    const dir = mkdtempSync(join(tmpdir(), "cordon-read-"));
    try {
      const line = (n: number): string => `log line ${n} ${"x".repeat(80)}`;
      const count = Math.ceil(limits.readMaxBytes / 90) + 1000;
      const content = Array.from({ length: count }, (_, i) => line(i + 1)).join("\n") + "\n";
      const name = "huge log's (1).txt";
      writeFileSync(join(dir, name), content);
      const sandbox = new MemorySandbox({
        workdir: dir,
        files: { [name]: content },
        exec: (command) => {
          const run = spawnSync("bash", ["-c", command], { cwd: dir, encoding: "utf8" });
          return { exitCode: run.status, stdout: run.stdout, stderr: run.stderr };
        },
      });
      const { call, text } = toolHarness(sandbox);
      const result = await call("read", { path: name, offset: 150_000, limit: 3 });
      expect(result.isError).toBe(false);
      expect(text(result)).toBe(
        [
          `150000\t${line(150_000)}`,
          `150001\t${line(150_001)}`,
          `150002\t${line(150_002)}`,
          `[${join(dir, name)} is ${Buffer.byteLength(content)} bytes, read as a range: lines 150000-150002 of ${count}. Continue with offset=150003.]`,
        ].join("\n"),
      );
      expect(sandbox.callsTo("files.readFile")).toEqual([]);
      const tail = text(await call("read", { path: name, offset: count - 1 }));
      expect(tail).toMatch(
        new RegExp(`lines ${count - 1}-${count} of ${count}\\. End of file\\.\\]$`),
      );
      const past = await call("read", { path: name, offset: count + 10 });
      expect(past.isError).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each(hostileNames)(
    "round-trips the hostile name %j through write, read and edit",
    async (name) => {
      const sandbox = new MemorySandbox();
      const { call, text } = toolHarness(sandbox);
      const dir = `dir ${name}`;
      const path = `${dir}/${name}`;
      expect((await call("write", { path, content: "one\ntwo\n" })).isError).toBe(false);
      expect(sandbox.files.getText(`/workspace/${path}`)).toBe("one\ntwo\n");
      expect(text(await call("read", { path }))).toBe("1\tone\n2\ttwo");
      const edit = await call("edit", { path, old_text: "two", new_text: "TWO" });
      expect(edit.isError).toBe(false);
      expect(sandbox.files.getText(`/workspace/${path}`)).toBe("one\nTWO\n");
      const listing = text(await call("ls", { path: dir }));
      expect(listing).toContain(name.includes("\n") ? JSON.stringify(name) : name);
    },
  );
});

describe("write", () => {
  it("creates parents, reports bytes, and says created vs overwrote", async () => {
    const sandbox = new MemorySandbox();
    const { call, text } = toolHarness(sandbox);
    const created = await call("write", { path: "a/b/c.txt", content: "héllo" });
    expect(text(created)).toBe("Created /workspace/a/b/c.txt (6 bytes).");
    const again = await call("write", { path: "/workspace/a/b/c.txt", content: "" });
    expect(text(again)).toBe("Overwrote /workspace/a/b/c.txt (0 bytes).");
    expect(sandbox.files.getText("a/b/c.txt")).toBe("");
  });

  it("writes through the sandbox's atomic writeFile, once", async () => {
    const sandbox = new MemorySandbox();
    const { call } = toolHarness(sandbox);
    await call("write", { path: "x.txt", content: "data" });
    expect(sandbox.callsTo("files.writeFile")).toHaveLength(1);
  });

  it("explains a write under a read-only /agent mount and leaves it unchanged", async () => {
    const sandbox = new MemorySandbox({
      files: { "/agent/src/main.ts": "orig" },
      readOnly: ["/agent"],
    });
    const { call, text } = toolHarness(sandbox);
    for (const [tool, input] of [
      ["write", { path: "/agent/src/main.ts", content: "new" }],
      ["write", { path: "/agent/new/dir/file.ts", content: "new" }],
      ["edit", { path: "/agent/src/main.ts", old_text: "orig", new_text: "new" }],
    ] as const) {
      const result = await call(tool, input);
      expect(result.isError, tool).toBe(true);
      expect(text(result)).toMatch(
        /read-only mount \(\/agent is read-only in workspaceAccess ro\)/,
      );
    }
    expect(sandbox.files.getText("/agent/src/main.ts")).toBe("orig");
    expect(sandbox.files.has("/agent/new")).toBe(false);
  });

  it("refuses to replace a directory", async () => {
    const sandbox = new MemorySandbox({ files: { "d/x": "1" } });
    const { call, text } = toolHarness(sandbox);
    const result = await call("write", { path: "d", content: "x" });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(/is a directory/);
  });

  it("writes a huge content in one piece", async () => {
    const sandbox = new MemorySandbox();
    const { call, text } = toolHarness(sandbox);
    const content = "z".repeat(5 * 1024 * 1024);
    expect(text(await call("write", { path: "big.txt", content }))).toMatch(/\(5242880 bytes\)/);
    expect(sandbox.files.getFile("big.txt")?.byteLength).toBe(5 * 1024 * 1024);
  });

  it("refuses a stale overwrite only when asked to", async () => {
    const sandbox = new MemorySandbox({ files: { "f.txt": "v1" } });
    const strict = toolHarness(sandbox, { write: { refuseStale: true } });
    await strict.call("read", { path: "f.txt" });
    sandbox.files.setFile("f.txt", "v2 from elsewhere");
    const refused = await strict.call("write", { path: "f.txt", content: "mine" });
    expect(refused.isError).toBe(true);
    expect(strict.text(refused)).toMatch(/changed since you last read it.*Read it again/);
    expect(sandbox.files.getText("f.txt")).toBe("v2 from elsewhere");

    const lenient = toolHarness(sandbox);
    await lenient.call("read", { path: "f.txt" });
    sandbox.files.setFile("f.txt", "v3");
    expect((await lenient.call("write", { path: "f.txt", content: "mine" })).isError).toBe(false);
  });
});

describe("edit", () => {
  it("replaces a unique match and returns a small diff", async () => {
    const sandbox = new MemorySandbox({
      files: { "src/a.ts": "const a = 1;\nconst b = 2;\nconst c = 3;\n" },
    });
    const { call, text } = toolHarness(sandbox);
    const result = await call("edit", {
      path: "src/a.ts",
      old_text: "const b = 2;",
      new_text: "const b = 20;",
    });
    expect(result.isError).toBe(false);
    expect(text(result)).toBe(
      "Edited /workspace/src/a.ts (1 replacement).\n--- a/src/a.ts\n+++ b/src/a.ts\n@@ -1,3 +1,3 @@\n const a = 1;\n-const b = 2;\n+const b = 20;\n const c = 3;\n",
    );
    expect(sandbox.files.getText("src/a.ts")).toBe("const a = 1;\nconst b = 20;\nconst c = 3;\n");
  });

  it("refuses zero matches, leaving the file unchanged, and points at a whitespace near miss", async () => {
    const original = "function f() {\n    return 1;\n}\n";
    const sandbox = new MemorySandbox({ files: { "f.js": original } });
    const { call, text } = toolHarness(sandbox);
    const result = await call("edit", {
      path: "f.js",
      old_text: "function f() {\n  return 1;",
      new_text: "x",
    });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(
      /old_text was not found in \/workspace\/f\.js; nothing was changed\. Lines 1 match except for whitespace/,
    );
    const none = await call("edit", { path: "f.js", old_text: "nowhere", new_text: "x" });
    expect(text(none)).toMatch(/not found.*Read the file again/);
    const caseOnly = await call("edit", { path: "f.js", old_text: "RETURN 1", new_text: "x" });
    expect(text(caseOnly)).toMatch(/differs only in letter case is at line 2/);
    expect(sandbox.files.getText("f.js")).toBe(original);
    expect(sandbox.callsTo("files.writeFile")).toEqual([]);
  });

  it("refuses several matches, saying how many and where, unless replace_all", async () => {
    const original = "x = 1\ny = 2\nx = 1\nz\nx = 1\n";
    const sandbox = new MemorySandbox({ files: { "m.py": original } });
    const { call, text } = toolHarness(sandbox);
    const refused = await call("edit", { path: "m.py", old_text: "x = 1", new_text: "x = 9" });
    expect(refused.isError).toBe(true);
    expect(text(refused)).toMatch(
      /occurs 3 times in \/workspace\/m\.py \(at lines 1, 3, 5\); nothing was changed/,
    );
    expect(text(refused)).toMatch(/replace_all: true/);
    expect(sandbox.files.getText("m.py")).toBe(original);
    const all = await call("edit", {
      path: "m.py",
      old_text: "x = 1",
      new_text: "x = 9",
      replace_all: true,
    });
    expect(text(all)).toMatch(/\(3 replacements\)/);
    expect(sandbox.files.getText("m.py")).toBe("x = 9\ny = 2\nx = 9\nz\nx = 9\n");
  });

  it("keeps CRLF line endings, the BOM, and a missing final newline", async () => {
    const sandbox = new MemorySandbox({
      files: { "win.txt": "\uFEFFa\r\nb\r\nc\r\n", "nonl.txt": "a\nb", "nl.txt": "a\nb\n" },
    });
    const { call } = toolHarness(sandbox);
    // Model sends LF text for a CRLF file; a multi-line match must still work.
    await call("edit", { path: "win.txt", old_text: "a\nb", new_text: "A\nB\nB2" });
    expect(sandbox.files.getText("win.txt")).toBe("\uFEFFA\r\nB\r\nB2\r\nc\r\n");
    await call("edit", { path: "nonl.txt", old_text: "b", new_text: "B\n" });
    expect(sandbox.files.getText("nonl.txt")).toBe("a\nB");
    await call("edit", { path: "nl.txt", old_text: "b\n", new_text: "B" });
    expect(sandbox.files.getText("nl.txt")).toBe("a\nB\n");
  });

  it("matches CRLF lines of a file with mixed line endings and leaves the LF lines alone", async () => {
    const sandbox = new MemorySandbox({ files: { "mix.txt": "a\r\nb\r\nc\nd\n" } });
    const { call } = toolHarness(sandbox);
    const result = await call("edit", { path: "mix.txt", old_text: "a\nb", new_text: "A\nB" });
    expect(result.isError).toBe(false);
    expect(sandbox.files.getText("mix.txt")).toBe("A\r\nB\r\nc\nd\n");
    await call("edit", { path: "mix.txt", old_text: "c\nd", new_text: "C\nD" });
    expect(sandbox.files.getText("mix.txt")).toBe("A\r\nB\r\nC\nD\n");
  });

  it("accepts CRLF in old_text for a CRLF file", async () => {
    const sandbox = new MemorySandbox({ files: { "w.txt": "one\r\ntwo\r\n" } });
    const { call } = toolHarness(sandbox);
    expect(
      (await call("edit", { path: "w.txt", old_text: "one\r\ntwo", new_text: "1\r\n2" })).isError,
    ).toBe(false);
    expect(sandbox.files.getText("w.txt")).toBe("1\r\n2\r\n");
  });

  it("treats $ patterns in new_text literally", async () => {
    const sandbox = new MemorySandbox({ files: { "s.txt": "price\n" } });
    const { call } = toolHarness(sandbox);
    await call("edit", { path: "s.txt", old_text: "price", new_text: "$& $1 $$ $'" });
    expect(sandbox.files.getText("s.txt")).toBe("$& $1 $$ $'\n");
  });

  it("refuses an edit of a file that changed since the last read (even with the same size and mtime)", async () => {
    const sandbox = new MemorySandbox({ files: { "c.txt": "value = 1\n" } });
    const { call, text } = toolHarness(sandbox);
    await call("read", { path: "c.txt" });
    sandbox.files.setFileKeepingMtime("c.txt", "value = 2\n");
    const refused = await call("edit", { path: "c.txt", old_text: "value", new_text: "v" });
    expect(refused.isError).toBe(true);
    expect(text(refused)).toMatch(
      /changed since you last read it.*Nothing was written\. Read it again/,
    );
    expect(sandbox.files.getText("c.txt")).toBe("value = 2\n");
    // After reading again the edit goes through.
    await call("read", { path: "c.txt" });
    expect((await call("edit", { path: "c.txt", old_text: "value", new_text: "v" })).isError).toBe(
      false,
    );
  });

  it("allows consecutive edits without re-reading: its own writes are not 'changes'", async () => {
    const sandbox = new MemorySandbox({ files: { "k.txt": "a\nb\nc\n" } });
    const { call } = toolHarness(sandbox);
    await call("read", { path: "k.txt" });
    expect((await call("edit", { path: "k.txt", old_text: "a", new_text: "A" })).isError).toBe(
      false,
    );
    expect((await call("edit", { path: "k.txt", old_text: "b", new_text: "B" })).isError).toBe(
      false,
    );
    await call("write", { path: "k.txt", content: "fresh\n" });
    expect((await call("edit", { path: "k.txt", old_text: "fresh", new_text: "F" })).isError).toBe(
      false,
    );
    expect(sandbox.files.getText("k.txt")).toBe("F\n");
  });

  it("keeps read state per toolset: another session's read does not vouch for this one", async () => {
    const sandbox = new MemorySandbox({ files: { "s.txt": "one\n" } });
    const a = toolHarness(sandbox);
    const b = toolHarness(sandbox);
    await a.call("read", { path: "s.txt" });
    await b.call("edit", { path: "s.txt", old_text: "one", new_text: "two" });
    const stale = await a.call("edit", { path: "s.txt", old_text: "two", new_text: "three" });
    expect(stale.isError).toBe(true);
  });

  it("serialises concurrent edits of one file so none is lost", async () => {
    const lines = Array.from({ length: 20 }, (_, i) => `line ${i}`);
    const sandbox = new MemorySandbox({ files: { "c.txt": `${lines.join("\n")}\n` } });
    const { call } = toolHarness(sandbox);
    const results = await Promise.all(
      lines.map((line, i) =>
        call("edit", { path: "c.txt", old_text: `${line}\n`, new_text: `edited ${i}\n` }),
      ),
    );
    expect(results.every((result) => !result.isError)).toBe(true);
    expect(sandbox.files.getText("c.txt")).toBe(lines.map((_, i) => `edited ${i}\n`).join(""));
    expect(pendingPathLocks()).toBe(0);
  });

  it("without the lock the same race would lose edits (the fake really interleaves)", async () => {
    const sandbox = new MemorySandbox({ files: { "r.txt": "a\nb\n" } });
    // Two raw read-modify-write sequences, unserialised.
    const raw = async (from: string, to: string): Promise<void> => {
      const text = new TextDecoder().decode(await sandbox.files.readFile("r.txt"));
      await sandbox.files.writeFile("r.txt", text.replace(from, to));
    };
    await Promise.all([raw("a", "A"), raw("b", "B")]);
    expect(sandbox.files.getText("r.txt")).not.toBe("A\nB\n");
  });

  it("refuses empty or identical texts and binary files", async () => {
    const sandbox = new MemorySandbox({
      files: { "t.txt": "x\n", "b.bin": new Uint8Array([0, 1]) },
    });
    const { call, text } = toolHarness(sandbox);
    expect(text(await call("edit", { path: "t.txt", old_text: "", new_text: "y" }))).toMatch(
      /old_text: /,
    );
    expect(text(await call("edit", { path: "t.txt", old_text: "x", new_text: "x" }))).toMatch(
      /identical/,
    );
    expect(text(await call("edit", { path: "b.bin", old_text: "x", new_text: "y" }))).toMatch(
      /binary/,
    );
    expect(text(await call("edit", { path: "none.txt", old_text: "x", new_text: "y" }))).toMatch(
      /does not exist. To create a file use write/,
    );
  });

  it("bounds the diff of a huge replacement", async () => {
    const big = Array.from({ length: 5000 }, (_, i) => `k${i}`).join("\n");
    const sandbox = new MemorySandbox({ files: { "h.txt": `start\n${big}\nend\n` } });
    const { call, text } = toolHarness(sandbox);
    const result = await call("edit", {
      path: "h.txt",
      old_text: big,
      new_text: big.toUpperCase(),
    });
    expect(result.isError).toBe(false);
    expect(text(result).length).toBeLessThan(5000);
    expect(text(result)).toMatch(/characters omitted/);
    expect(sandbox.files.getText("h.txt")).toBe(`start\n${big.toUpperCase()}\nend\n`);
  });
});
