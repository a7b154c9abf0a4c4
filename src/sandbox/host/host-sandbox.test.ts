import { execFileSync } from "node:child_process";
import { getEventListeners } from "node:events";
import { link, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { AbortedError, FileOperationError, SandboxError, sleep } from "../../common/index.js";
import { HostSandbox } from "./host-sandbox.js";

/**
 * Host sleep processes whose command line contains `marker` (a test-side check, never a kill).
 * Only sleeps count: a shell whose script mentions the sleep may be exiting at that moment.
 */
/**
 * A sleep no other process on the machine runs: the test's pid as the fraction, so a scan of the
 * whole machine cannot match someone else's `sleep 2001` (or a shell's `sleep 200`).
 */
const tag = `.${process.pid}`;
const sleepFor = (seconds: number): string => `sleep ${seconds}${tag}`;

function hostProcesses(marker: string): string[] {
  const ps = execFileSync("ps", ["-eo", "args="], { encoding: "utf8" });
  return ps.split("\n").filter((line) => /^sleep[\s-]/.test(line) && line.includes(marker));
}

async function fileError(work: Promise<unknown>): Promise<FileOperationError> {
  const error = await work.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(FileOperationError);
  return error as FileOperationError;
}

// Real processes on a shared machine: generous time, never asserted.
describe("HostSandbox", { timeout: 60_000 }, () => {
  let base: string;
  let root: string;
  let outside: string;
  let sandbox: HostSandbox;

  beforeAll(async () => {
    base = await mkdtemp(path.join(tmpdir(), "cordon-host-test-"));
    root = path.join(base, "workspace");
    outside = path.join(base, "outside");
    await mkdir(root);
    await mkdir(outside);
    await writeFile(path.join(outside, "secret.txt"), "host secret\n");
    await writeFile(path.join(root, "inside.txt"), "inside\n");
    sandbox = await HostSandbox.create({
      root,
      env: { DECLARED: "yes" },
      stateDirectory: path.join(base, "state"),
      hostEnv: {
        PATH: process.env["PATH"],
        LANG: "C.UTF-8",
        ANTHROPIC_API_KEY: "sk-ant-must-not-leak",
        AWS_SECRET_ACCESS_KEY: "must-not-leak",
      },
    });
  });

  afterAll(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it("is the host, rooted at the real workspace path", () => {
    expect(sandbox.id).toBe("host");
    expect(sandbox.kind).toBe("host");
    expect(sandbox.workdir).toBe(root);
  });

  it("refuses a workspace that does not exist", async () => {
    await expect(HostSandbox.create({ root: path.join(base, "nope") })).rejects.toBeInstanceOf(
      SandboxError,
    );
  });

  describe("confinement", () => {
    it("refuses .. and absolute paths outside the root, before touching anything", async () => {
      for (const escape of ["../outside/secret.txt", "a/../../outside/secret.txt", "/etc/passwd"]) {
        const error = await fileError(sandbox.files.readFile(escape));
        expect(error.reason).toBe("outside_sandbox");
      }
      expect((await fileError(sandbox.files.writeFile("../escape.txt", "x"))).reason).toBe(
        "outside_sandbox",
      );
      await expect(stat(path.join(base, "escape.txt"))).rejects.toThrow(/ENOENT/);
      expect((await fileError(sandbox.files.stat("/etc/passwd"))).reason).toBe("outside_sandbox");
      expect((await fileError(sandbox.files.list("/etc"))).reason).toBe("outside_sandbox");
      expect((await fileError(sandbox.files.mkdir("../made"))).reason).toBe("outside_sandbox");
      expect((await fileError(sandbox.files.remove("../outside/secret.txt"))).reason).toBe(
        "outside_sandbox",
      );
      expect((await fileError(sandbox.files.rename("inside.txt", "../stolen.txt"))).reason).toBe(
        "outside_sandbox",
      );
      // An absolute path inside the root is the same file as the relative one.
      expect(
        new TextDecoder().decode(await sandbox.files.readFile(path.join(root, "inside.txt"))),
      ).toBe("inside\n");
    });

    it("refuses symlink escapes at every component, dangling ones included", async () => {
      await symlink("/etc", path.join(root, "etc-link"));
      await symlink(path.join(outside, "secret.txt"), path.join(root, "secret-link"));
      await symlink(outside, path.join(root, "parent-link"));
      await symlink(
        path.join(outside, "created-through-dangling.txt"),
        path.join(root, "dangling"),
      );

      expect((await fileError(sandbox.files.readFile("etc-link/passwd"))).reason).toBe(
        "outside_sandbox",
      );
      expect((await fileError(sandbox.files.readFile("secret-link"))).reason).toBe(
        "outside_sandbox",
      );
      expect((await fileError(sandbox.files.stat("secret-link"))).reason).toBe("outside_sandbox");
      expect((await fileError(sandbox.files.readFile("parent-link/secret.txt"))).reason).toBe(
        "outside_sandbox",
      );
      expect((await fileError(sandbox.files.writeFile("secret-link", "overwritten"))).reason).toBe(
        "outside_sandbox",
      );
      expect((await fileError(sandbox.files.writeFile("parent-link/new.txt", "x"))).reason).toBe(
        "outside_sandbox",
      );
      expect((await fileError(sandbox.files.writeFile("dangling", "x"))).reason).toBe(
        "outside_sandbox",
      );
      expect((await fileError(sandbox.files.mkdir("parent-link/dir"))).reason).toBe(
        "outside_sandbox",
      );
      expect((await fileError(sandbox.files.list("parent-link"))).reason).toBe("outside_sandbox");
      expect((await fileError(sandbox.exec("pwd", { cwd: "parent-link" }))).reason).toBe(
        "outside_sandbox",
      );
      expect((await fileError(sandbox.exec("pwd", { cwd: "/proc/self/root/etc" }))).reason).toBe(
        "outside_sandbox",
      );

      expect(await readFile(path.join(outside, "secret.txt"), "utf8")).toBe("host secret\n");
      await expect(stat(path.join(outside, "created-through-dangling.txt"))).rejects.toThrow(
        /ENOENT/,
      );
      await expect(stat(path.join(outside, "new.txt"))).rejects.toThrow(/ENOENT/);

      // Removing a link removes the link only; listing shows links as links.
      const listing = await sandbox.files.list(".");
      expect(listing.entries.find((e) => e.name === "secret-link")?.type).toBe("symlink");
      await sandbox.files.remove("secret-link");
      expect(await readFile(path.join(outside, "secret.txt"), "utf8")).toBe("host secret\n");
      // A chain that stays inside is fine.
      await symlink("inside.txt", path.join(root, "inner-link"));
      expect(new TextDecoder().decode(await sandbox.files.readFile("inner-link"))).toBe("inside\n");
    });

    it("refuses to read a hard link to a file outside, and a write replaces it instead of writing through", async () => {
      const target = path.join(outside, "linked.txt");
      await writeFile(target, "outside content\n");
      await link(target, path.join(root, "hardlink.txt"));
      const error = await fileError(sandbox.files.readFile("hardlink.txt"));
      expect(error.reason).toBe("outside_sandbox");
      expect(error.message).toMatch(/hard links/);
      await sandbox.files.writeFile("hardlink.txt", "new inside content\n");
      expect(await readFile(target, "utf8")).toBe("outside content\n");
      expect(new TextDecoder().decode(await sandbox.files.readFile("hardlink.txt"))).toBe(
        "new inside content\n",
      );
    });
  });

  describe("files", () => {
    it("round-trips binary content, writes atomically and keeps modes", async () => {
      const bytes = Uint8Array.from({ length: 300 }, (_, i) => i % 256);
      await sandbox.files.writeFile("dir/-dash name\n.bin", bytes);
      expect(Buffer.from(await sandbox.files.readFile("dir/-dash name\n.bin")).equals(bytes)).toBe(
        true,
      );
      await sandbox.files.writeFile("run.sh", "#!/bin/sh\n", { mode: 0o755 });
      await sandbox.files.writeFile("run.sh", "#!/bin/sh\necho hi\n");
      expect((await sandbox.files.stat("run.sh"))?.mode).toBe(0o755);
      const leftovers = (await sandbox.files.list(".")).entries.filter((e) =>
        e.name.includes(".cordon-write"),
      );
      expect(leftovers).toEqual([]);
      expect(
        (await fileError(sandbox.files.writeFile("nowhere/x.txt", "x", { createParents: false })))
          .reason,
      ).toBe("not_found");
      expect((await fileError(sandbox.files.writeFile("dir", "x"))).reason).toBe("is_directory");
      expect((await fileError(sandbox.files.readFile("dir"))).reason).toBe("is_directory");
      expect((await fileError(sandbox.files.readFile("missing"))).reason).toBe("not_found");
      expect((await fileError(sandbox.files.readFile("run.sh", { maxBytes: 3 }))).reason).toBe(
        "too_large",
      );
    });

    it("stats like stat(2) and lists sorted with depth and limit", async () => {
      await sandbox.files.writeFile("tree/b/2.txt", "22");
      await sandbox.files.writeFile("tree/a.txt", "1");
      await symlink("a.txt", path.join(root, "tree/to-a"));
      await symlink("missing", path.join(root, "tree/dangling"));
      expect((await sandbox.files.stat("tree/to-a"))?.type).toBe("file");
      expect((await sandbox.files.stat("tree/dangling"))?.type).toBe("symlink");
      expect(await sandbox.files.stat("tree/none")).toBeUndefined();
      expect(await sandbox.files.stat("tree/a.txt/under-file")).toBeUndefined();
      expect(await sandbox.files.stat("tree/a.txt")).toMatchObject({
        path: path.join(root, "tree/a.txt"),
        type: "file",
        size: 1,
      });
      const deep = await sandbox.files.list("tree", { depth: 2 });
      expect(deep.entries.map((e) => `${e.name}:${e.type}`)).toEqual([
        "a.txt:file",
        "b:directory",
        "b/2.txt:file",
        "dangling:symlink",
        "to-a:symlink",
      ]);
      const limited = await sandbox.files.list("tree", { depth: 2, limit: 2 });
      expect(limited).toMatchObject({ truncated: true });
      expect(limited.entries).toHaveLength(2);
      expect((await fileError(sandbox.files.list("tree/a.txt"))).reason).toBe("not_directory");
    });

    it("mkdir -p, remove and rename", async () => {
      await sandbox.files.mkdir("ops/x/y");
      await sandbox.files.writeFile("ops/x/y/f.txt", "f");
      expect((await fileError(sandbox.files.remove("ops/x"))).reason).toBe("other");
      await sandbox.files.rename("ops/x/y/f.txt", "ops/g.txt");
      await sandbox.files.remove("ops/x", { recursive: true });
      expect(await sandbox.files.stat("ops/x")).toBeUndefined();
      expect((await fileError(sandbox.files.remove("ops/x"))).reason).toBe("not_found");
      expect((await fileError(sandbox.files.rename("ops/none", "ops/z"))).reason).toBe("not_found");
      expect((await fileError(sandbox.files.mkdir("ops/g.txt"))).reason).toBe("not_directory");
      expect((await fileError(sandbox.files.remove("."))).reason).toBe("other");
    });
  });

  describe("exec", () => {
    it("runs bash -lc in the root with a scrubbed environment", async () => {
      const result = await sandbox.exec('pwd; echo "$HOME|$DECLARED|$CALL"; env', {
        env: { CALL: "per-call" },
      });
      expect(result.exitCode).toBe(0);
      const [pwd, vars] = result.stdout.split("\n");
      expect(pwd).toBe(root);
      expect(vars).toBe(`${root}|yes|per-call`);
      expect(result.stdout).not.toMatch(/must-not-leak|ANTHROPIC|AWS_SECRET|CORDON_SCRIPT/);
      expect((await sandbox.exec("pwd", { cwd: "dir" })).stdout).toBe(
        `${path.join(root, "dir")}\n`,
      );
      expect((await fileError(sandbox.exec("pwd", { cwd: "missing" }))).reason).toBe("not_found");
    });

    it("leaves no listener on a long-lived signal", async () => {
      const controller = new AbortController();
      const signal = controller.signal;
      await sandbox.exec("true", { signal, timeoutMs: 60_000 });
      await sandbox.files.readFile("inside.txt", { signal });
      await sandbox.processes.list({ signal });
      expect(getEventListeners(signal, "abort")).toHaveLength(0);
    });

    it("passes stdin and reports exit codes and signals", async () => {
      expect((await sandbox.exec("tr a-z A-Z", { stdin: "abc" })).stdout).toBe("ABC");
      expect((await sandbox.exec("exit 4")).exitCode).toBe(4);
      expect(await sandbox.exec("kill -TERM $$")).toMatchObject({
        exitCode: null,
        signal: "SIGTERM",
      });
    });

    it("kills the whole tree on timeout and what a command leaves behind", async () => {
      const result = await sandbox.exec(
        [
          `${sleepFor(2001)} &`,
          `setsid ${sleepFor(2002)} &`,
          `bash -c 'trap "" TERM; ${sleepFor(2003)}' &`,
          // Clears the marker, leaves the session, is orphaned: still holds the call's output.
          `(env -i setsid ${sleepFor(2005)} &)`,
          "echo started",
          sleepFor(2004),
        ].join("\n"),
        { timeoutMs: 1000 },
      );
      expect(result).toMatchObject({ timedOut: true, exitCode: null, stdout: "started\n" });
      expect(hostProcesses(tag)).toEqual([]);
      await sandbox.exec(`${sleepFor(2011)} & echo done`);
      expect(hostProcesses(sleepFor(2011))).toEqual([]);
    });

    it("aborts with AbortedError and nothing left running", async () => {
      const controller = new AbortController();
      const run = sandbox.exec(`echo go; ${sleepFor(2021)}`, {
        signal: controller.signal,
        onStdout: () => controller.abort(),
      });
      await expect(run).rejects.toBeInstanceOf(AbortedError);
      expect(hostProcesses(sleepFor(2021))).toEqual([]);
    });

    it("a throwing output callback fails the call and leaves nothing running", async () => {
      const run = sandbox.exec(`echo go; ${sleepFor(2041)}`, {
        onStdout: () => {
          throw new Error("renderer broke");
        },
      });
      await expect(run).rejects.toThrow(/renderer broke/);
      expect(hostProcesses(sleepFor(2041))).toEqual([]);
    });

    it("caps output and saves the full log where the file tools may read it", async () => {
      const result = await sandbox.exec("seq 1 200000", { maxOutputBytes: 1000 });
      expect(result.truncated).toBe(true);
      expect(result.stdout).toMatch(/^1\n2\n/);
      expect(result.stdout).toMatch(/200000\n$/);
      const logPath = result.fullOutputPath ?? "";
      expect(logPath.startsWith(path.join(base, "state"))).toBe(true);
      const log = new TextDecoder().decode(await sandbox.files.readFile(logPath));
      expect(log.split("\n")).toHaveLength(200001);
      // Older logs make room for new ones.
      for (let i = 0; i < 9; i++) await sandbox.exec("seq 1 1000", { maxOutputBytes: 100 });
      expect(await sandbox.files.stat(logPath)).toBeUndefined();
      // Only the logs: the rest of the state directory stays out of reach.
      expect((await fileError(sandbox.files.list(path.join(base, "state")))).reason).toBe(
        "outside_sandbox",
      );
    });
  });

  describe("background processes", () => {
    it("start, poll, write, kill", async () => {
      const info = await sandbox.processes.start(
        `echo "up in $PWD"; while read -r l; do echo "got:$l"; done; ${sleepFor(2031)}`,
      );
      let output = "";
      for (let i = 0; i < 100 && !output.includes("up in"); i++) {
        output += (await sandbox.processes.poll(info.id)).output;
        await sleep(20);
      }
      expect(output).toBe(`up in ${root}\n`);
      await sandbox.processes.write(info.id, "ping\n");
      for (let i = 0; i < 100 && !output.includes("got:ping"); i++) {
        output += (await sandbox.processes.poll(info.id)).output;
        await sleep(20);
      }
      expect(output).toContain("got:ping\n");
      expect((await sandbox.processes.list()).map((p) => p.id)).toContain(info.id);
      expect(await sandbox.processes.kill(info.id)).toMatchObject({
        state: "exited",
        exitCode: null,
      });
      expect(hostProcesses(sleepFor(2031))).toEqual([]);
      expect((await fileError(sandbox.processes.poll("p-ffffffffffff"))).reason).toBe("not_found");
    });
  });
});
