import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  createToolRunner,
  startDockerToolSandbox,
  type DockerToolSandbox,
  type ToolRunner,
} from "../support/tool-runner.js";

/** A 1×1 PNG. */
const pngBase64 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/**
 * read, write and edit through the toolset, against one real hardened container (uid 1000,
 * read-only root, tmpfs /tmp) with a writable workspace and a read-only bind mount at /agent.
 * Files are made and checked with exec inside the container, so what is asserted is the
 * container's view.
 */
describe("file tools over DockerSandbox", () => {
  let box: DockerToolSandbox;
  let tools: ToolRunner;
  let hostAgent: string;

  beforeAll(async () => {
    hostAgent = await mkdtemp(path.join(tmpdir(), "cordon-tools-agent-"));
    await writeFile(path.join(hostAgent, "readme.txt"), "agent file\n");
    await chmod(hostAgent, 0o777);
    await chmod(path.join(hostAgent, "readme.txt"), 0o666);
    box = await startDockerToolSandbox({
      name: "tools-files",
      mounts: [{ source: hostAgent, target: "/agent", readOnly: true, role: "agent-workspace" }],
    });
    tools = createToolRunner({ sandbox: box.sandbox });
  });

  afterAll(async () => {
    await box?.dispose();
    if (hostAgent) await rm(hostAgent, { recursive: true, force: true });
  });

  /** Runs a setup or check command in the container; it must succeed. */
  async function sh(command: string): Promise<string> {
    const result = await box.sandbox.exec(command);
    expect(result.exitCode, `${command}\n${result.stderr}`).toBe(0);
    return result.stdout;
  }

  describe("read", () => {
    it("numbers lines, and says so for an empty file, a directory and a missing file", async () => {
      await sh("printf 'alpha\\n\\tbeta\\ngamma' > abc.txt; : > empty.txt; mkdir -p adir");
      expect(await tools.ok("read", { path: "abc.txt" })).toBe("1\talpha\n2\t\tbeta\n3\tgamma");
      expect(await tools.ok("read", { path: "/workspace/empty.txt" })).toBe(
        "/workspace/empty.txt is empty (0 lines).",
      );
      expect(await tools.fail("read", { path: "adir" })).toBe(
        "/workspace/adir is a directory, not a file. Use ls to list it.",
      );
      expect(await tools.fail("read", { path: "nope.txt" })).toMatch(
        /^\/workspace\/nope.txt does not exist/,
      );
      expect(await tools.fail("read", { path: "abc.txt", offset: 0 })).toContain("- offset:");
    });

    it("pages a 5000-line file with hints that lead to its end", async () => {
      await sh("seq 1 5000 > lines.txt");
      const first = (await tools.ok("read", { path: "lines.txt" })).split("\n");
      expect(first).toHaveLength(2001);
      expect(first[0]).toBe("   1\t1");
      expect(first[1999]).toBe("2000\t2000");
      expect(first[2000]).toBe("[Showing lines 1-2000 of 5000. Continue with offset=2001.]");

      const second = (await tools.ok("read", { path: "lines.txt", offset: 2001 })).split("\n");
      expect(second.at(-1)).toBe("[Showing lines 2001-4000 of 5000. Continue with offset=4001.]");
      const last = (await tools.ok("read", { path: "lines.txt", offset: 4001 })).split("\n");
      expect(last.at(-2)).toBe("5000\t5000");
      expect(last.at(-1)).toBe("[Showing lines 4001-5000 of 5000; end of file.]");
      expect(await tools.ok("read", { path: "lines.txt", offset: 6000 })).toContain(
        "offset 6000 is past the end",
      );
    });

    it("refuses a binary file with a note and returns an image as image content", async () => {
      await sh("printf 'ELF\\0\\1\\2\\3binary' > prog.bin");
      expect(await tools.fail("read", { path: "prog.bin" })).toMatch(
        /^\/workspace\/prog.bin is a binary file \(\d+ bytes\), not text; .*xxd/,
      );

      await sh(`printf %s '${pngBase64}' | base64 -d > dot.png`);
      const result = await tools.call("read", { path: "dot.png" });
      expect(result.isError).toBe(false);
      await sh("{ printf '\\x89PNG\\r\\n\\x1a\\n'; head -c 6000000 /dev/zero; } > big.png");
      expect(await tools.fail("read", { path: "big.png" })).toBe(
        "/workspace/big.png is a image/png of 6000008 bytes, over the 5242880-byte image limit. Scale it down first (exec).",
      );

      const bytes = Buffer.from(pngBase64, "base64").byteLength;
      expect(result.content).toEqual([
        { type: "text", text: `/workspace/dot.png (image/png, ${bytes} bytes):` },
        { type: "image", mediaType: "image/png", dataBase64: pngBase64 },
      ]);
    });

    it("pages a 20 MB file by cutting the range out inside the container", async () => {
      await sh("seq 1 3000000 > huge.txt");
      const size = Number(await sh("stat -c %s huge.txt"));
      expect(size).toBeGreaterThan(20_000_000);

      const range = (
        await tools.ok("read", { path: "huge.txt", offset: 2_500_000, limit: 3 })
      ).split("\n");
      expect(range).toEqual([
        "2500000\t2500000",
        "2500001\t2500001",
        "2500002\t2500002",
        `[/workspace/huge.txt is ${size} bytes, read as a range: lines 2500000-2500002 of 3000000. Continue with offset=2500003.]`,
      ]);
      const head = (await tools.ok("read", { path: "huge.txt" })).split("\n");
      expect(head).toHaveLength(2001);
      expect(head.at(-1)).toContain("lines 1-2000 of 3000000. Continue with offset=2001.]");
      const tail = await tools.ok("read", { path: "huge.txt", offset: 3_000_000 });
      expect(tail).toMatch(/^3000000\t3000000\n.*of 3000000\. End of file\.\]$/);

      // Too large to load whole: edit and apply_patch refuse and point at exec.
      expect(
        await tools.fail("edit", { path: "huge.txt", old_text: "2500000\n", new_text: "x\n" }),
      ).toBe(
        `/workspace/huge.txt is ${size} bytes, more than edit loads (16777216). Use exec (e.g. sed) for a file this large.`,
      );
      const patch = ["--- a/huge.txt", "+++ b/huge.txt", "@@ -1 +1 @@", "-1", "+one", ""].join(
        "\n",
      );
      expect(await tools.fail("apply_patch", { patch })).toContain(
        `/workspace/huge.txt is too large to patch (${size} bytes); use exec`,
      );
      expect(await sh("head -n 1 huge.txt; sha256sum < huge.txt | head -c 8")).toBe(
        `1\n${(await sh("seq 1 3000000 | sha256sum")).slice(0, 8)}`,
      );
    });
  });

  describe("write", () => {
    it("creates missing parents, reports bytes, and says created or overwrote", async () => {
      expect(await tools.ok("write", { path: "a/b/c/new.txt", content: "héllo\n" })).toBe(
        "Created /workspace/a/b/c/new.txt (7 bytes).",
      );
      expect(await sh("cat a/b/c/new.txt; stat -c '%u %a' a/b/c/new.txt a/b")).toBe(
        "héllo\n1000 644\n1000 755\n",
      );
      expect(await tools.ok("write", { path: "a/b/c/new.txt", content: "" })).toBe(
        "Overwrote /workspace/a/b/c/new.txt (0 bytes).",
      );
      expect(await tools.fail("write", { path: "a/b", content: "x" })).toBe(
        "/workspace/a/b is a directory; write needs a file path.",
      );
      expect(await tools.fail("write", { path: "a/b/c/new.txt/under", content: "x" })).toMatch(
        /is not a directory|a component of the path is a file/,
      );
    });

    it("replaces the file atomically: a concurrent reader never sees a partial file", async () => {
      const size = 400_000;
      await tools.ok("write", { path: "atomic.txt", content: "a\n".repeat(size / 2) });
      const inodeBefore = await sh("stat -c %i atomic.txt");
      // Holding the original open pins its inode number, so a replacement cannot reuse it (ext4
      // hands a freed number straight back): a different number then proves a rename, not a rewrite.
      const holder = await box.sandbox.processes.start("exec 3< atomic.txt; echo held; sleep 120");
      // Started is not yet open: wait until it holds the file (a write can take a millisecond).
      let held = "";
      for (let attempt = 0; attempt < 100 && !held.includes("held"); attempt++) {
        held += (await box.sandbox.processes.poll(holder.id)).output;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const reader = await box.sandbox.processes.start(
        `while [ ! -e stop ]; do n=$(wc -c < atomic.txt); [ "$n" = ${size} ] || echo "PARTIAL:$n"; done; echo reader-done`,
      );
      for (const letter of ["b", "c", "d", "e"]) {
        await tools.ok("write", { path: "atomic.txt", content: `${letter}\n`.repeat(size / 2) });
      }
      await sh(": > stop");
      let output = "";
      for (let attempt = 0; attempt < 100 && !output.includes("reader-done"); attempt++) {
        output += (await box.sandbox.processes.poll(reader.id)).output;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(output).toBe("reader-done\n");
      expect(await sh("sort -u atomic.txt")).toBe("e\n");
      expect(await sh("stat -c %i atomic.txt")).not.toBe(inodeBefore);
      await box.sandbox.processes.kill(holder.id);
      expect(await sh("ls -A | grep -c cordon-write || true")).toBe("0\n");
    });

    it("round-trips hostile names: unicode, spaces, a newline, leading dashes, quotes, $()", async () => {
      const names = [
        "ünïcødé-日本語.txt",
        "with space.txt",
        " leading space",
        "new\nline.txt",
        "-rf",
        "--help",
        "-",
        `it's "quoted".txt`,
        "$(touch pwned).txt",
        "back\\slash*?.txt",
      ];
      await sh("mkdir -p names");
      for (const name of names) {
        const content = `content of ${JSON.stringify(name)}\n`;
        await tools.ok("write", { path: `names/${name}`, content });
        expect(await tools.ok("read", { path: `names/${name}` })).toBe(`1\t${content.trim()}`);
      }
      const listed = (await sh("cd names && printf '%s\\0' *")).split("\0").filter(Boolean);
      expect(listed.sort()).toEqual([...names].sort());
      expect(
        await sh(
          "ls -d /pwned /workspace/pwned /workspace/names/pwned /tmp/pwned 2>&1 | grep -vc 'No such' || true",
        ),
      ).toBe("0\n");
    });

    it("refuses a write into the read-only /agent mount, saying read-only, changing nothing", async () => {
      const existing = await tools.fail("write", { path: "/agent/readme.txt", content: "x" });
      expect(existing).toMatch(/read-only/);
      expect(existing).toContain("/agent is read-only");
      const created = await tools.fail("write", { path: "/agent/new/file.txt", content: "x" });
      expect(created).toMatch(/read-only/);
      expect(await readFile(path.join(hostAgent, "readme.txt"), "utf8")).toBe("agent file\n");
      expect(await sh("ls -A /agent")).toBe("readme.txt\n");

      const edit = await tools.fail("edit", {
        path: "/agent/readme.txt",
        old_text: "agent",
        new_text: "model",
      });
      expect(edit).toMatch(/read-only/);
      expect(await tools.fail("write", { path: "/usr/local/x", content: "x" })).toMatch(
        /read-only/,
      );
    });

    it("writes 8 MB of content in one call", async () => {
      const line = `${"x".repeat(99)}\n`;
      const content = line.repeat(80_000);
      expect(await tools.ok("write", { path: "big-write.txt", content })).toBe(
        "Created /workspace/big-write.txt (8000000 bytes).",
      );
      expect(await sh("sha256sum < big-write.txt")).toBe(
        await sh(`yes ${"x".repeat(99)} | head -n 80000 | sha256sum`),
      );
    });
  });

  describe("edit", () => {
    it("replaces an exact, unique match and returns a small diff", async () => {
      await sh("printf 'one\\ntwo\\nthree\\n' > e1.txt");
      await tools.ok("read", { path: "e1.txt" });
      const text = await tools.ok("edit", { path: "e1.txt", old_text: "two", new_text: "2" });
      expect(text).toContain("Edited /workspace/e1.txt (1 replacement).");
      expect(text).toContain("-two\n+2");
      expect(await sh("cat e1.txt")).toBe("one\n2\nthree\n");
    });

    it("refuses zero and several matches, saying how many and where, the file unchanged", async () => {
      await sh("printf 'x = 1\\ny = 2\\nx = 1\\nz = 3\\nx = 1\\n' > e2.txt");
      const before = await sh("sha256sum e2.txt");
      const none = await tools.fail("edit", { path: "e2.txt", old_text: "w = 9", new_text: "w" });
      expect(none).toMatch(/^old_text was not found in \/workspace\/e2.txt; nothing was changed\./);
      const many = await tools.fail("edit", { path: "e2.txt", old_text: "x = 1", new_text: "x" });
      expect(many).toMatch(/^old_text occurs 3 times in \/workspace\/e2.txt \(at lines 1, 3, 5\)/);
      expect(await sh("sha256sum e2.txt")).toBe(before);

      expect(
        await tools.ok("edit", {
          path: "e2.txt",
          old_text: "x = 1",
          new_text: "x = 0",
          replace_all: true,
        }),
      ).toContain("(3 replacements)");
      expect(await sh("grep -c 'x = 0' e2.txt")).toBe("3\n");
    });

    it("keeps CRLF line endings, the BOM and a missing final newline", async () => {
      await sh("printf '\\xef\\xbb\\xbfone\\r\\ntwo\\r\\nthree' > crlf.txt");
      await tools.ok("edit", { path: "crlf.txt", old_text: "one\ntwo", new_text: "1\n2\n2.5" });
      expect(
        await sh(
          "cmp crlf.txt <(printf '\\xef\\xbb\\xbf1\\r\\n2\\r\\n2.5\\r\\nthree') && echo same",
        ),
      ).toBe("same\n");
    });

    it("refuses an edit of a file changed (by exec) since the model read it, then allows it after a new read", async () => {
      await sh("printf 'version = 1\\n' > stale.txt");
      await tools.ok("read", { path: "stale.txt" });
      // Same size, so only the content tells the change apart.
      await tools.ok("exec", { command: "sed -i 's/1/2/' stale.txt" });
      const refused = await tools.fail("edit", {
        path: "stale.txt",
        old_text: "version",
        new_text: "release",
      });
      expect(refused).toContain("/workspace/stale.txt changed since you last read it");
      expect(refused).toContain("Nothing was written.");
      expect(await sh("cat stale.txt")).toBe("version = 2\n");

      await tools.ok("read", { path: "stale.txt" });
      await tools.ok("edit", { path: "stale.txt", old_text: "version", new_text: "release" });
      // Its own write is not a change: a second edit needs no new read.
      await tools.ok("edit", { path: "stale.txt", old_text: "2", new_text: "3" });
      expect(await sh("cat stale.txt")).toBe("release = 3\n");
    });

    it("serialises concurrent edits of one file so none is lost", async () => {
      await sh("seq -f 'line %g' 1 6 > concurrent.txt");
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          tools.call("edit", {
            path: "concurrent.txt",
            old_text: `line ${i + 1}\n`,
            new_text: `LINE ${i + 1}\n`,
          }),
        ),
      );
      expect(results.filter((result) => result.isError)).toEqual([]);
      expect(await sh("grep -c '^LINE' concurrent.txt")).toBe("6\n");
    });
  });
});
