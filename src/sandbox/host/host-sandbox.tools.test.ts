import { createHash } from "node:crypto";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createToolRunner, type ToolRunner } from "../../../test/support/tool-runner.js";
import { HostSandbox } from "./host-sandbox.js";

const hasRipgrep = spawnSync("rg", ["--version"]).status === 0;

/** A 1×1 PNG. */
const pngBase64 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/**
 * The built-in tools through the toolset (the runner's path) over a HostSandbox on temp
 * directories: the key cases of the Docker integration tests, and the escapes mode off must
 * refuse in every file tool (DESIGN.md §4: confined to the workspace, symlinks included).
 */
describe("tools over HostSandbox", () => {
  let base: string;
  let root: string;
  let outside: string;
  let tools: ToolRunner;
  const hostsHash = sha256(execFileSync("cat", ["/etc/hosts"]));

  function sha256(bytes: Uint8Array | string): string {
    return createHash("sha256").update(bytes).digest("hex");
  }

  /** Host processes whose command line contains `marker` (test-side check, never a kill). */
  function hostProcesses(marker: string): string[] {
    const ps = execFileSync("ps", ["-eo", "args="], { encoding: "utf8" });
    return ps.split("\n").filter((line) => line.includes(marker) && !line.includes("ps -eo"));
  }

  beforeAll(async () => {
    base = await mkdtemp(path.join(tmpdir(), "cordon-host-tools-"));
    root = path.join(base, "workspace");
    outside = path.join(base, "outside");
    await mkdir(root);
    await mkdir(outside);
    await writeFile(path.join(outside, "secret.txt"), "host secret\n");
    const sandbox = await HostSandbox.create({
      root,
      stateDirectory: path.join(base, "state"),
    });
    tools = createToolRunner({ sandbox });
  });

  afterAll(async () => {
    await rm(base, { recursive: true, force: true });
  });

  describe("exec and process", () => {
    it("returns output and exit code, caps huge output with a log read can page", async () => {
      expect(await tools.fail("exec", { command: "pwd; exit 4" })).toMatch(
        new RegExp(`^${root}\\n\\[exit code 4, `),
      );
      const big = await tools.ok("exec", { command: "seq 1 200000" });
      expect(big).toMatch(/\n200000\n\[exit code 0, /);
      expect(big).not.toMatch(/\n100000\n/);
      const log = /Full output: (\S+) \(read it/.exec(big)?.[1] ?? "";
      expect(log.startsWith(path.join(base, "state"))).toBe(true);
      expect(await tools.ok("read", { path: log, offset: 100_000, limit: 1 })).toMatch(
        /^100000\t100000\n/,
      );
    });

    it("kills escaped children on timeout, passes env, refuses a workdir outside the root", async () => {
      const timedOut = await tools.fail("exec", {
        command: "setsid sleep 3071 & (nohup sleep 3072 >/dev/null 2>&1 &); sleep 3073",
        timeoutSec: 1,
      });
      expect(timedOut).toContain("timed out after 1s and was killed");
      expect(hostProcesses("sleep 307")).toEqual([]);

      expect(await tools.ok("exec", { command: 'printf %s "$V"', env: { V: "a 'b' $c" } })).toMatch(
        /^a 'b' \$c\n/,
      );
      for (const workdir of ["../outside", "/etc", "/proc/self/root/etc"]) {
        expect(await tools.fail("exec", { command: "touch ran", workdir })).toMatch(
          /outside the sandbox/,
        );
      }
      expect(await readdir(outside)).toEqual(["secret.txt"]);
    });

    it("drives a background process through poll, write and kill", async () => {
      const started = await tools.ok("exec", {
        command: 'echo ready; while read -r l; do echo "got:$l"; done',
        background: true,
      });
      const id = /Started background process (\S+):/.exec(started)?.[1] ?? "";
      let seen = "";
      for (let i = 0; i < 100 && !seen.includes("ready"); i++) {
        seen += await tools.ok("process", { action: "poll", id });
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await tools.ok("process", { action: "write", id, data: "ping\n" });
      for (let i = 0; i < 100 && !seen.includes("got:ping"); i++) {
        seen += await tools.ok("process", { action: "poll", id });
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(seen).toContain("got:ping");
      expect(await tools.ok("process", { action: "kill", id })).toMatch(/^Killed /);
      expect(await tools.ok("process", { action: "list" })).toContain(`${id}: exited`);
    });
  });

  describe("read, write, edit, apply_patch", () => {
    it("read numbers and pages a 5000-line file, refuses binary, returns images", async () => {
      await writeFile(
        path.join(root, "lines.txt"),
        Array.from({ length: 5000 }, (_, i) => `${i + 1}\n`).join(""),
      );
      const first = (await tools.ok("read", { path: "lines.txt" })).split("\n");
      expect(first[0]).toBe("   1\t1");
      expect(first.at(-1)).toBe("[Showing lines 1-2000 of 5000. Continue with offset=2001.]");
      await writeFile(path.join(root, "prog.bin"), Buffer.from([0x7f, 0x45, 0, 1, 2, 3]));
      expect(await tools.fail("read", { path: "prog.bin" })).toMatch(/is a binary file/);
      await writeFile(path.join(root, "dot.png"), Buffer.from(pngBase64, "base64"));
      const image = await tools.call("read", { path: "dot.png" });
      expect(image.content[1]).toEqual({
        type: "image",
        mediaType: "image/png",
        dataBase64: pngBase64,
      });
    });

    it("read pages a 20 MB file as a range", async () => {
      execFileSync("bash", ["-c", "seq 1 3000000 > huge.txt"], { cwd: root });
      const range = await tools.ok("read", { path: "huge.txt", offset: 2_999_999 });
      expect(range).toMatch(
        /^2999999\t2999999\n3000000\t3000000\n\[.*huge\.txt is \d+ bytes, read as a range: lines 2999999-3000000 of 3000000\. End of file\.\]$/,
      );
      await rm(path.join(root, "huge.txt"));
    });

    it("read and edit refuse a fifo at once instead of blocking on it", async () => {
      execFileSync("mkfifo", [path.join(root, "pipe")]);
      expect(await tools.fail("read", { path: "pipe" })).toMatch(/pipe is not a regular file/);
      expect(await tools.fail("edit", { path: "pipe", old_text: "a", new_text: "b" })).toMatch(
        /pipe is not a regular file/,
      );
      await rm(path.join(root, "pipe"));
    });

    it("write creates parents and round-trips hostile names", async () => {
      for (const name of ["a/b/ünï 日本.txt", "-rf", "--help", "new\nline", " lead", `q'"$(x)`]) {
        expect(
          await tools.ok("write", { path: name, content: `${JSON.stringify(name)}\n` }),
        ).toMatch(/^Created /);
        expect(await readFile(path.join(root, name), "utf8")).toBe(`${JSON.stringify(name)}\n`);
      }
    });

    it("edit: exact match, counted refusals, CRLF/BOM kept, stale read refused", async () => {
      await writeFile(path.join(root, "e.txt"), "\uFEFFx = 1\r\ny = 2\r\nx = 1");
      await tools.ok("read", { path: "e.txt" });
      expect(await tools.fail("edit", { path: "e.txt", old_text: "x = 1", new_text: "x" })).toMatch(
        /occurs 2 times .* \(at lines 1, 3\)/,
      );
      expect(await tools.fail("edit", { path: "e.txt", old_text: "w", new_text: "v" })).toMatch(
        /^old_text was not found/,
      );
      await tools.ok("edit", { path: "e.txt", old_text: "y = 2\nx", new_text: "y = 3\nx" });
      expect(await readFile(path.join(root, "e.txt"), "utf8")).toBe(
        "\uFEFFx = 1\r\ny = 3\r\nx = 1",
      );

      await tools.ok("exec", { command: "printf 'changed\\n' > e.txt" });
      expect(
        await tools.fail("edit", { path: "e.txt", old_text: "changed", new_text: "again" }),
      ).toContain("changed since you last read it");
      expect(await readFile(path.join(root, "e.txt"), "utf8")).toBe("changed\n");
    });

    it("apply_patch changes nothing when one hunk fails, everything when all apply", async () => {
      await writeFile(path.join(root, "p1.txt"), "one\ntwo\n");
      await writeFile(path.join(root, "p2.txt"), "gone\n");
      const patch = (context: string): string =>
        [
          "--- a/p1.txt",
          "+++ b/p1.txt",
          "@@ -1,2 +1,2 @@",
          ` ${context}`,
          "-two",
          "+TWO",
          "--- a/p2.txt",
          "+++ /dev/null",
          "@@ -1 +0,0 @@",
          "-gone",
          "--- /dev/null",
          "+++ b/p3/new.txt",
          "@@ -0,0 +1 @@",
          "+new",
          "",
        ].join("\n");
      expect(await tools.fail("apply_patch", { patch: patch("uno") })).toMatch(
        /^The patch does not apply; nothing was changed/,
      );
      expect(await readFile(path.join(root, "p1.txt"), "utf8")).toBe("one\ntwo\n");
      expect(await readFile(path.join(root, "p2.txt"), "utf8")).toBe("gone\n");
      await expect(readFile(path.join(root, "p3/new.txt"))).rejects.toThrow(/ENOENT/);

      await tools.ok("apply_patch", { patch: patch("one") });
      expect(await readFile(path.join(root, "p1.txt"), "utf8")).toBe("one\nTWO\n");
      expect(await readFile(path.join(root, "p3/new.txt"), "utf8")).toBe("new\n");
      await expect(readFile(path.join(root, "p2.txt"))).rejects.toThrow(/ENOENT/);
    });
  });

  describe("ls, find, grep", () => {
    beforeAll(() => {
      execFileSync(
        "bash",
        [
          "-c",
          "mkdir many && cd many && seq 1 1200 | sed 's/^/needle /' | split -l 1 -a 3 --additional-suffix=.txt - f",
        ],
        { cwd: root },
      );
    });

    it("ls and find (ripgrep or its listing fallback) bound their results with a 'more' marker", async () => {
      expect((await tools.ok("ls", { path: "many" })).split("\n").at(-1)).toMatch(
        /^\[… more entries not shown \(stopped at 500\)/,
      );
      const found = (await tools.ok("find", { pattern: "*.txt", path: "many" })).split("\n");
      expect(found).toHaveLength(501);
      expect(found.at(-1)).toMatch(/^\[… more matches not shown \(stopped at 500\)/);
      expect(await tools.ok("find", { pattern: "fab{c,d}.txt", path: "many" })).toBe(
        "fabc.txt\nfabd.txt",
      );
    });

    // Mode off uses the host's ripgrep; without one grep says what to do instead.
    it.runIf(hasRipgrep)("grep bounds its matches with a 'more' marker", async () => {
      const grep = (await tools.ok("grep", { pattern: "needle", path: "many" })).split("\n");
      expect(grep).toHaveLength(301);
      expect(grep.at(-1)).toMatch(/^\[… more matches not shown \(stopped at 300\)/);
      expect(await tools.ok("grep", { pattern: "--x|^needle 1199$", path: "many" })).toMatch(
        /^many\/f[a-z]{3}\.txt:1:needle 1199$/,
      );
    });

    it.skipIf(hasRipgrep)("grep without ripgrep on the host points at exec", async () => {
      expect(await tools.fail("grep", { pattern: "needle", path: "many" })).toBe(
        "grep needs ripgrep (rg), which is not installed in this sandbox. Use exec with grep -rn instead.",
      );
    });
  });

  describe("escapes are refused by every file tool", () => {
    beforeAll(async () => {
      await symlink("/etc/passwd", path.join(root, "passwd-link"));
      await symlink(path.join(outside, "secret.txt"), path.join(root, "secret-link"));
      await symlink(outside, path.join(root, "outside-dir"));
      await symlink("/etc", path.join(root, "etc-link"));
    });

    afterAll(async () => {
      expect(await readdir(outside)).toEqual(["secret.txt"]);
      expect(await readFile(path.join(outside, "secret.txt"), "utf8")).toBe("host secret\n");
      expect(sha256(execFileSync("cat", ["/etc/hosts"]))).toBe(hostsHash);
    });

    /** Files outside the root, named four ways. Writes only ever target the decoy outside. */
    const readTargets = [
      "passwd-link",
      "../outside/secret.txt",
      "../../../../../../etc/hosts",
      "/etc/hosts",
      "outside-dir/secret.txt",
      "etc-link/passwd",
    ];
    const writeTargets = [
      "secret-link",
      "../outside/secret.txt",
      "../outside/new.txt",
      "outside-dir/secret.txt",
      "outside-dir/new.txt",
      `/tmp/cordon-host-escape-${process.pid}`,
    ];
    const dirTargets = ["..", "../outside", "/etc", "outside-dir", "etc-link"];
    const outsideMessage = /outside the sandbox/;

    it("read", async () => {
      for (const target of readTargets) {
        expect(await tools.fail("read", { path: target }), target).toMatch(outsideMessage);
      }
    });

    it("write", async () => {
      for (const target of writeTargets) {
        expect(await tools.fail("write", { path: target, content: "pwned\n" }), target).toMatch(
          outsideMessage,
        );
      }
      await expect(readFile(`/tmp/cordon-host-escape-${process.pid}`)).rejects.toThrow(/ENOENT/);
    });

    it("edit", async () => {
      for (const target of [...readTargets, ...writeTargets]) {
        const text = await tools.fail("edit", {
          path: target,
          old_text: "host",
          new_text: "pwned",
        });
        expect(text, target).toMatch(outsideMessage);
      }
    });

    it("apply_patch", async () => {
      for (const target of [...readTargets, ...writeTargets]) {
        const patch = [
          `--- a/${target}`,
          `+++ b/${target}`,
          "@@ -1 +1 @@",
          "-host secret",
          "+pwned",
          "",
        ].join("\n");
        expect(await tools.fail("apply_patch", { patch }), target).toMatch(outsideMessage);
      }
      const add = ["--- /dev/null", "+++ b/../outside/added.txt", "@@ -0,0 +1 @@", "+pwned", ""];
      expect(await tools.fail("apply_patch", { patch: add.join("\n") })).toMatch(outsideMessage);
    });

    it("ls, find and grep", async () => {
      for (const target of dirTargets) {
        expect(await tools.fail("ls", { path: target }), target).toMatch(outsideMessage);
        expect(await tools.fail("find", { pattern: "*", path: target }), target).toMatch(
          outsideMessage,
        );
        expect(await tools.fail("grep", { pattern: "root|secret", path: target }), target).toMatch(
          outsideMessage,
        );
      }
      for (const target of readTargets) {
        expect(
          await tools.fail("grep", { pattern: "root|secret|localhost", path: target }),
          target,
        ).toMatch(outsideMessage);
      }
      // A search of the whole workspace does not follow the links out of it.
      expect(await tools.ok("find", { pattern: "secret.txt" })).toMatch(/^No files match/);
      if (hasRipgrep) {
        expect(await tools.ok("grep", { pattern: "host secret" })).toMatch(/^No matches/);
      }
    });
  });
});
