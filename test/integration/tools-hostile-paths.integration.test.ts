import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { execIn } from "../support/docker.js";
import {
  createToolRunner,
  startDockerToolSandbox,
  type DockerToolSandbox,
  type ToolRunner,
} from "../support/tool-runner.js";

/**
 * Hostile paths through every file tool, against one real hardened container. In a container the
 * container is the sandbox: `../../etc/passwd` is the container's /etc/passwd, never the host's,
 * and what the sandbox user (uid 1000) may not touch the container's kernel refuses.
 */
describe("hostile paths through the file tools over DockerSandbox", () => {
  let box: DockerToolSandbox;
  let tools: ToolRunner;
  const hostPasswdHash = sha256(readFileSync("/etc/passwd"));
  const escapeName = `cordon-escape-${process.pid}`;

  beforeAll(async () => {
    box = await startDockerToolSandbox({ name: "tools-hostile" });
    tools = createToolRunner({ sandbox: box.sandbox });
    await sh("ln -s /etc/shadow shadow-link && ln -s /etc etc-link && printf 'safe\\n' > safe.txt");
  });

  afterAll(async () => {
    // Nothing a tool did may reach the host's /etc or /tmp.
    expect(sha256(readFileSync("/etc/passwd"))).toBe(hostPasswdHash);
    expect(existsSync(`/etc/${escapeName}`)).toBe(false);
    expect(existsSync(`/tmp/${escapeName}`)).toBe(false);
    await box?.dispose();
  });

  function sha256(bytes: Uint8Array): string {
    return createHash("sha256").update(bytes).digest("hex");
  }

  async function sh(command: string): Promise<string> {
    const result = await box.sandbox.exec(command);
    expect(result.exitCode, `${command}\n${result.stderr}`).toBe(0);
    return result.stdout;
  }

  /**
   * Size, mtime (ns) and inode of a container file: any write changes one of them. stat needs no
   * read permission, so it also works for /etc/shadow.
   */
  async function fingerprint(path: string): Promise<string> {
    const result = await execIn(box.container, ["stat", "-c", "%s %.9Y %i", "--", path]);
    expect(result.exitCode).toBe(0);
    return result.stdout;
  }

  describe("../../etc stays the container's /etc", () => {
    it("read, ls, find and grep show the container's files, not the host's", async () => {
      const passwd = await sh("cat /etc/passwd");
      const numbered = passwd
        .trimEnd()
        .split("\n")
        .map((line, i, all) => `${String(i + 1).padStart(String(all.length).length)}\t${line}`)
        .join("\n");
      expect(await tools.ok("read", { path: "../../etc/passwd" })).toBe(numbered);
      // The image's sandbox user; the host has none.
      expect(passwd).toContain("sandbox:x:1000:1000");
      expect(readFileSync("/etc/passwd", "utf8")).not.toContain("sandbox:x:1000:1000");

      const root = (await tools.ok("ls", { path: "../.." })).split("\n");
      expect(root[0]).toBe("/:");
      expect(root).toContain("workspace/");
      // /etc/ssl/private is closed to uid 1000: find says so and still answers.
      expect(await tools.ok("find", { pattern: "passwd", path: "../../etc" })).toMatch(
        /^pam.d\/passwd\npasswd\n\[Some directories could not be searched: .*ssl\/private.*Permission denied/,
      );
      expect(await tools.ok("grep", { pattern: "^sandbox:", path: "../../etc/passwd" })).toMatch(
        /^\.\.\/\.\.\/etc\/passwd:\d+:sandbox:x:1000:1000:/,
      );
    });

    it("write, edit and apply_patch cannot change /etc: the kernel refuses (read-only root)", async () => {
      const before = await fingerprint("/etc/passwd");
      expect(await tools.fail("write", { path: `../../etc/${escapeName}`, content: "x" })).toMatch(
        /^Cannot modify \/etc\/cordon-escape-\d+: it is on a read-only mount/,
      );
      expect(
        await tools.fail("write", { path: "../../etc/passwd", content: "root::0:0::/:/bin/sh\n" }),
      ).toMatch(/read-only/);
      await tools.ok("read", { path: "/etc/passwd" });
      expect(
        await tools.fail("edit", {
          path: "../../etc/passwd",
          old_text: "root:x",
          new_text: "root:",
        }),
      ).toMatch(/read-only/);
      const firstLine = (await sh("head -n 1 /etc/passwd")).trimEnd();
      expect(
        await tools.fail("apply_patch", {
          patch: [
            "--- a/../../etc/passwd",
            "+++ b/../../etc/passwd",
            "@@ -1 +1 @@",
            `-${firstLine}`,
            "+root::0:0:root:/root:/bin/bash",
            "",
          ].join("\n"),
        }),
      ).toMatch(/^Writing the patched files failed: Cannot modify \/etc\/passwd: .*read-only/);
      expect(await fingerprint("/etc/passwd")).toBe(before);
      expect(await box.sandbox.files.stat(`/etc/${escapeName}`)).toBeUndefined();
    });

    it("../../tmp is the container's tmpfs, not the host's /tmp", async () => {
      expect(
        await tools.ok("write", { path: `../../tmp/${escapeName}`, content: "inside\n" }),
      ).toBe(`Created /tmp/${escapeName} (7 bytes).`);
      expect(await sh(`cat /tmp/${escapeName}`)).toBe("inside\n");
      expect(existsSync(`/tmp/${escapeName}`)).toBe(false);
    });
  });

  describe("a symlink in the workspace to /etc/shadow", () => {
    it("is refused by read, edit, grep and apply_patch with permission denied (uid 1000)", async () => {
      const before = await fingerprint("/etc/shadow");
      expect(await tools.fail("read", { path: "shadow-link" })).toBe(
        "Permission denied for /workspace/shadow-link: the sandbox user may not access it. Work in the workspace instead.",
      );
      expect(
        await tools.fail("edit", { path: "shadow-link", old_text: "root", new_text: "toor" }),
      ).toMatch(/^Permission denied for \/workspace\/shadow-link/);
      expect(await tools.fail("grep", { pattern: "root", path: "shadow-link" })).toBe(
        "grep failed: shadow-link: Permission denied (os error 13)",
      );
      expect(
        await tools.fail("apply_patch", {
          patch: [
            "--- a/shadow-link",
            "+++ b/shadow-link",
            "@@ -1 +1 @@",
            "-root",
            "+toor",
            "",
          ].join("\n"),
        }),
      ).toMatch(/Permission denied for \/workspace\/shadow-link/);
      expect(await fingerprint("/etc/shadow")).toBe(before);
    });

    it("a write through it is refused by the read-only root, and the link stays a link", async () => {
      const before = await fingerprint("/etc/shadow");
      expect(await tools.fail("write", { path: "shadow-link", content: "root::0:0\n" })).toMatch(
        /read-only/,
      );
      expect(await sh("readlink shadow-link")).toBe("/etc/shadow\n");
      expect(await fingerprint("/etc/shadow")).toBe(before);
    });

    it("a symlinked parent directory leads to the container's /etc, still read-only", async () => {
      expect(await tools.ok("read", { path: "etc-link/hostname" })).toMatch(/^1\t[0-9a-f]{12}$/);
      expect(await tools.fail("write", { path: "etc-link/evil", content: "x" })).toMatch(
        /read-only/,
      );
      expect(await tools.ok("ls", { path: "etc-link" })).toContain("passwd");
    });
  });

  describe("special files", () => {
    it("a fifo and devices are refused at once, never read until they end", async () => {
      await sh("mkfifo pipe");
      for (const target of ["pipe", "/dev/zero", "/dev/urandom"]) {
        expect(await tools.fail("read", { path: target }), target).toMatch(/not a regular file/);
      }
      expect(await tools.fail("edit", { path: "pipe", old_text: "a", new_text: "b" })).toMatch(
        /not a regular file/,
      );
      expect(await tools.ok("ls", { path: "." })).toContain("pipe  (special file)");
      await sh("rm pipe");
    });
  });

  describe("malformed paths", () => {
    it("a NUL byte, an overlong name and an empty path are error results, nothing written", async () => {
      // Not resolved first: "safe.txt\0.." must not be taken for a directory that .. leaves.
      expect(await tools.fail("read", { path: "safe.txt\u0000/../../etc/passwd" })).toMatch(
        /^"safe.txt\\u0000\/..\/..\/etc\/passwd": the path contains a NUL byte/,
      );
      expect(await tools.fail("write", { path: "a\u0000b", content: "x" })).toMatch(/NUL byte/);
      const long = "x".repeat(300);
      expect(await tools.fail("write", { path: long, content: "x" })).toMatch(/name too long/i);
      expect(await tools.fail("read", { path: "" })).toContain("- path:");
      expect(await sh("ls -A")).toBe("etc-link\nsafe.txt\nshadow-link\n");
    });
  });
});
