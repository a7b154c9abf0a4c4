import { randomBytes } from "node:crypto";
import { getEventListeners } from "node:events";
import {
  chmod,
  chown,
  mkdir,
  mkdtemp,
  readFile,
  readlink,
  rm,
  stat,
  symlink,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { AbortedError, FileOperationError, SandboxError, sleep } from "../../src/common/index.js";
import type { ProcessOutput } from "../../src/sandbox/index.js";
import { DockerEngine, DockerSandbox } from "../../src/sandbox/index.js";
import { createContainerOptions } from "../../src/sandbox/docker/container-options.js";
import {
  dockerClient,
  removeContainer,
  requireSandboxImage,
  testLabel,
  testExecutorVolume,
} from "../support/docker.js";
import { testSandboxSpec } from "../support/sandbox-spec.js";
import type { SandboxSpec } from "../../src/sandbox/index.js";

/**
 * DockerSandbox against one real, hardened container (read-only root, no network, no
 * capabilities, uid 1000) with a writable workspace bind mount at /workspace and a read-only one
 * at /agent.
 */
describe("DockerSandbox", () => {
  const docker = dockerClient();
  let container: Docker.Container | undefined;
  let sandbox: DockerSandbox;
  let hostWorkspace: string;
  let hostAgent: string;

  /**
   * Sleeping processes whose command line contains `pattern` (test-side ps). Only processes that
   * are a sleep count: a shell whose script mentions the sleep may be exiting at that moment.
   */
  async function processesMatching(pattern: string, on = sandbox): Promise<string[]> {
    const ps = await on.exec("ps -eo pid=,args=");
    return ps.stdout
      .split("\n")
      .filter((line) => /^\s*\d+\s+sleep[\s-]/.test(line) && line.includes(pattern));
  }

  /** What still matches after up to 5 s of looking: [] once the processes are gone. */
  async function processesGone(pattern: string, on = sandbox): Promise<string[]> {
    let left = await processesMatching(pattern, on);
    for (let tries = 0; left.length > 0 && tries < 50; tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      left = await processesMatching(pattern, on);
    }
    return left;
  }

  /**
   * A started container of its own for a test that breaks it (kills it, fills its pids), with
   * the sandbox over it; remove the container when done.
   */
  async function startedSandbox(
    spec: SandboxSpec,
    executorVolume?: string,
  ): Promise<{ container: Docker.Container; sandbox: DockerSandbox }> {
    const created = await docker.createContainer(
      createContainerOptions({
        spec,
        image: await requireSandboxImage(),
        createdAt: new Date().toISOString(),
        extraLabels: testLabel,
        executorVolume,
      }),
    );
    await created.start();
    const over = new DockerSandbox({
      engine: new DockerEngine(),
      containerId: created.id,
      containerName: spec.containerName,
      workdir: "/tmp",
      user: "1000:1000",
      executor: spec.docker.executor,
    });
    return { container: created, sandbox: over };
  }

  async function fileError(work: Promise<unknown>): Promise<FileOperationError> {
    const error = await work.then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(FileOperationError);
    return error as FileOperationError;
  }

  beforeAll(async () => {
    const image = await requireSandboxImage();
    hostWorkspace = await mkdtemp(path.join(tmpdir(), "cordon-ds-ws-"));
    hostAgent = await mkdtemp(path.join(tmpdir(), "cordon-ds-agent-"));
    await chown(hostWorkspace, 1000, 1000);
    await writeFile(path.join(hostAgent, "readme.txt"), "agent file\n");
    await chmod(hostAgent, 0o755);
    const spec = testSandboxSpec("docker-sandbox", {
      docker: {
        memoryBytes: 256 * 1024 ** 2,
        memorySwapBytes: 256 * 1024 ** 2,
        pidsLimit: 256,
      },
      spec: {
        mounts: [
          { source: hostWorkspace, target: "/workspace", readOnly: false, role: "workspace" },
          { source: hostAgent, target: "/agent", readOnly: true, role: "agent-workspace" },
        ],
      },
    });
    container = await docker.createContainer(
      createContainerOptions({
        spec,
        image,
        createdAt: new Date().toISOString(),
        extraLabels: testLabel,
        executorVolume: await testExecutorVolume(image),
      }),
    );
    await container.start();
    sandbox = new DockerSandbox({
      engine: new DockerEngine(),
      containerId: container.id,
      containerName: spec.containerName,
      workdir: "/workspace",
      user: "1000:1000",
      executor: spec.docker.executor,
    });
  });

  afterAll(async () => {
    await removeContainer(container);
    await rm(hostWorkspace, { recursive: true, force: true });
    await rm(hostAgent, { recursive: true, force: true });
  });

  describe("exec", () => {
    it("runs bash -lc in the workdir as the sandbox user, stdout and stderr apart", async () => {
      const result = await sandbox.exec("echo out; echo err >&2; pwd; id -u; exit 3");
      expect(result).toMatchObject({
        exitCode: 3,
        stdout: "out\n/workspace\n1000\n",
        stderr: "err\n",
        truncated: false,
        timedOut: false,
        oomKilled: false,
      });
      expect(sandbox.id).toMatch(/^cordon-test-docker-sandbox-/);
      expect(sandbox.kind).toBe("docker");
    });

    it("streams output while the command still runs", async () => {
      let finished = false;
      let firstChunkBeforeEnd: boolean | undefined;
      const run = sandbox.exec("echo first; sleep 0.5; echo second", {
        onStdout: () => {
          firstChunkBeforeEnd ??= !finished;
        },
      });
      const result = await run;
      finished = true;
      expect(firstChunkBeforeEnd).toBe(true);
      expect(result.stdout).toBe("first\nsecond\n");
    });

    it("sets per-call environment, winning over the login profile, for that call only", async () => {
      const result = await sandbox.exec('echo "$GREETING|$PATH"', {
        env: { GREETING: 'it\'s "quoted" $HOME', PATH: "/opt/custom:/usr/bin:/bin" },
      });
      expect(result.stdout).toBe(`it's "quoted" $HOME|/opt/custom:/usr/bin:/bin\n`);
      const next = await sandbox.exec('echo "[$GREETING]"');
      expect(next.stdout).toBe("[]\n");
    });

    it("passes stdin, and gives an empty stdin without it", async () => {
      const withInput = await sandbox.exec("tr a-z A-Z", { stdin: "hello\nworld" });
      expect(withInput.stdout).toBe("HELLO\nWORLD");
      const binary = Uint8Array.from([0, 1, 2, 255, 10]);
      const echoed = await sandbox.exec("od -An -tu1", { stdin: binary });
      expect(echoed.stdout.trim().split(/\s+/)).toEqual(["0", "1", "2", "255", "10"]);
      const without = await sandbox.exec("cat; echo done");
      expect(without.stdout).toBe("done\n");
    });

    it("runs in a cwd relative to the workdir and refuses a missing, file or /proc one", async () => {
      await sandbox.files.mkdir("sub/dir");
      await sandbox.files.writeFile("sub/file", "x");
      expect((await sandbox.exec("pwd", { cwd: "sub/dir" })).stdout).toBe("/workspace/sub/dir\n");
      expect((await fileError(sandbox.exec("pwd", { cwd: "nope" }))).reason).toBe("not_found");
      expect((await fileError(sandbox.exec("pwd", { cwd: "sub/file" }))).reason).toBe(
        "not_directory",
      );
      for (const cwd of ["/proc/self/cwd", "/proc/1/root", "/workspace/../proc/self", "/dev"]) {
        const error = await fileError(sandbox.exec("pwd", { cwd }));
        expect(error.reason).toBe("outside_sandbox");
      }
      // A symlink through /proc is resolved first: it lands in the container's own /etc.
      await sandbox.exec("ln -s /proc/self/root sub/procroot");
      expect((await sandbox.exec("pwd", { cwd: "sub/procroot/etc" })).stdout).toBe("/etc\n");
      await sandbox.exec("ln -s /proc/self sub/procself");
      expect((await fileError(sandbox.exec("pwd", { cwd: "sub/procself" }))).reason).toBe(
        "outside_sandbox",
      );
    });

    it("kills the whole tree on timeout: background, setsid and TERM-ignoring children", async () => {
      const result = await sandbox.exec(
        [
          "sleep 1001 &",
          "setsid sleep 1002 &",
          "bash -c 'trap \"\" TERM; exec -a sleep-1003 sleep 1003' &",
          "(env -u CORDON_RUN setsid sleep 1004 &)",
          "echo started",
          "sleep 1005",
        ].join("\n"),
        { timeoutMs: 1500 },
      );
      expect(result.timedOut).toBe(true);
      expect(result.exitCode).toBeNull();
      expect(result.signal).toBe("SIGKILL");
      expect(result.stdout).toBe("started\n");
      expect(await processesMatching("100")).toEqual([]);
    });

    it("kills what a command left running when it exits", async () => {
      const result = await sandbox.exec("sleep 1011 & setsid sleep 1012 & echo bye");
      expect(result.exitCode).toBe(0);
      expect(result.stdout).toBe("bye\n");
      expect(await processesMatching("sleep 101")).toEqual([]);
    });

    it("aborts: kills the tree and rejects with AbortedError", async () => {
      const controller = new AbortController();
      const run = sandbox.exec("echo go; sleep 1021 & sleep 1022", {
        signal: controller.signal,
        onStdout: () => controller.abort(),
      });
      await expect(run).rejects.toBeInstanceOf(AbortedError);
      expect(await processesMatching("sleep 102")).toEqual([]);
      await expect(sandbox.exec("true", { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(
        AbortedError,
      );
    });

    it("leaves no listener on a long-lived signal", async () => {
      const controller = new AbortController();
      const signal = controller.signal;
      await sandbox.exec("true", { signal, timeoutMs: 60_000 });
      await sandbox.exec("exit 3", { signal });
      await sandbox.files.readFile("/etc/hostname", { signal });
      await sandbox.files.stat("/nope", { signal });
      await sandbox.files.list("/tmp", { signal });
      await sandbox.processes.list({ signal });
      expect(getEventListeners(signal, "abort")).toHaveLength(0);
    });

    it("caps output while streaming, keeps head and tail, and saves the full log", async () => {
      let streamed = 0;
      const result = await sandbox.exec(
        "echo BEGIN; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo END; echo err >&2",
        {
          maxOutputBytes: 10_000,
          onStdout: (chunk) => (streamed += chunk.byteLength),
        },
      );
      expect(result.exitCode).toBe(0);
      expect(result.truncated).toBe(true);
      expect(streamed).toBe(3_000_011);
      expect(result.stdout.startsWith("BEGIN\nxxx")).toBe(true);
      expect(result.stdout.endsWith("xxx\nEND\n")).toBe(true);
      expect(result.stdout).toMatch(/\[… \d+ bytes omitted …\]/);
      expect(result.stdout.length).toBeLessThan(10_100);
      expect(result.stderr).toBe("err\n");
      expect(result.fullOutputPath).toMatch(/^\/tmp\/\.cordon\/logs\/.+\.log$/);
      const log = await sandbox.files.stat(result.fullOutputPath ?? "");
      expect(log?.size).toBe(3_000_015);
      const tail = await sandbox.exec(`tail -c 8 ${result.fullOutputPath ?? ""}`);
      expect(tail.stdout).toMatch(/END\n/);
    });

    it("keeps the orchestrator's memory bounded under an output flood; the log is capped", async () => {
      const before = process.memoryUsage().rss;
      let peak = before;
      const result = await sandbox.exec("head -c 400000000 /dev/zero", {
        maxOutputBytes: 64 * 1024,
        onStdout: () => {
          peak = Math.max(peak, process.memoryUsage().rss);
        },
      });
      expect(result.truncated).toBe(true);
      expect(result.stdout.length).toBeLessThan(70 * 1024);
      // 400 MB went through; the process grew by a small fraction of that.
      expect(peak - before).toBeLessThan(150 * 1024 * 1024);
      const log = await sandbox.files.stat(result.fullOutputPath ?? "");
      expect(log?.size).toBeGreaterThan(16 * 1024 * 1024);
      expect(log?.size).toBeLessThan(17 * 1024 * 1024);
      const note = await sandbox.exec(`tail -c 100 ${result.fullOutputPath ?? ""} | tr -d '\\0'`);
      expect(note.stdout).toMatch(/output past \d+ bytes was not saved/);
      await sandbox.files.remove(result.fullOutputPath ?? "");
    });

    it("keeps only the newest full-output logs", async () => {
      const paths: string[] = [];
      for (let i = 0; i < 11; i++) {
        const result = await sandbox.exec(`seq 1 1000; echo run-${i}`, { maxOutputBytes: 100 });
        paths.push(result.fullOutputPath ?? "");
      }
      const logs = await sandbox.files.list("/tmp/.cordon/logs");
      expect(logs.entries.length).toBeLessThanOrEqual(8);
      expect(logs.entries.map((e) => `/tmp/.cordon/logs/${e.name}`)).toContain(paths.at(-1));
      expect(await sandbox.files.stat(paths[0] ?? "")).toBeUndefined();
    });

    it("reports an OOM kill as such", async () => {
      const result = await sandbox.exec(
        "python3 -c 'b = bytearray(600 * 1024 * 1024); print(len(b))'",
      );
      expect(result.oomKilled).toBe(true);
      expect(result.exitCode).toBeNull();
      expect(result.signal).toBe("SIGKILL");
      expect((await sandbox.exec("echo alive")).stdout).toBe("alive\n");
    });

    it("reports a signal death, and an ordinary failure as an exit code", async () => {
      const segv = await sandbox.exec("kill -SEGV $$");
      expect(segv).toMatchObject({ exitCode: null, signal: "SIGSEGV", oomKilled: false });
      const pipe = await sandbox.exec("yes | head -c 1 >/dev/null; exit 141");
      expect(pipe.exitCode).toBe(141);
    });
  });

  describe("files", () => {
    it("round-trips binary content under hostile names", async () => {
      const bytes = Uint8Array.from({ length: 512 }, (_, i) => i % 256);
      const names = ["-rf", "with space.bin", "ünïcödé ✓.txt", "new\nline", "--", "a'b\"c$d`e"];
      for (const name of names) {
        await sandbox.files.writeFile(`names/${name}`, bytes);
        expect(Buffer.from(await sandbox.files.readFile(`names/${name}`)).equals(bytes)).toBe(true);
      }
      const listing = await sandbox.files.list("names");
      expect(listing.entries.map((entry) => entry.name).sort()).toEqual([...names].sort());
      expect(listing.entries.every((entry) => entry.type === "file" && entry.size === 512)).toBe(
        true,
      );
      const text = "héllo\r\nwörld\n\u0000end";
      await sandbox.files.writeFile("/tmp/text.txt", text);
      expect(new TextDecoder().decode(await sandbox.files.readFile("/tmp/text.txt"))).toBe(text);
      await sandbox.files.writeFile("empty", "");
      expect((await sandbox.files.readFile("empty")).byteLength).toBe(0);
    });

    it("writes and reads a 10 MB file", async () => {
      const big = randomBytes(10 * 1024 * 1024);
      await sandbox.files.writeFile("big.bin", big);
      expect((await sandbox.files.stat("big.bin"))?.size).toBe(big.byteLength);
      const back = await sandbox.files.readFile("big.bin");
      expect(Buffer.from(back).equals(big)).toBe(true);
    });

    it("writes atomically: a reader never sees a partial or mixed file", async () => {
      const size = 1024 * 1024;
      await sandbox.files.writeFile("atomic.txt", "a".repeat(size));
      const reader = sandbox.exec(
        `for i in $(seq 1 400); do
           cp atomic.txt /tmp/snapshot
           n=$(wc -c < /tmp/snapshot); a=$(tr -d a < /tmp/snapshot | wc -c); b=$(tr -d b < /tmp/snapshot | wc -c)
           if [[ $n != ${size} || ($a != 0 && $b != 0) ]]; then echo "BAD n=$n a=$a b=$b"; fi
         done; echo checked`,
      );
      for (let i = 0; i < 12; i++) {
        await sandbox.files.writeFile("atomic.txt", (i % 2 === 0 ? "b" : "a").repeat(size));
      }
      const result = await reader;
      expect(result.stdout).toBe("checked\n");
    });

    it("keeps an existing file's mode, applies the mode of a new one, writes through symlinks", async () => {
      await sandbox.files.writeFile("script.sh", "#!/bin/sh\necho one\n");
      await sandbox.exec("chmod 751 script.sh");
      await sandbox.files.writeFile("script.sh", "#!/bin/sh\necho two\n");
      expect((await sandbox.files.stat("script.sh"))?.mode).toBe(0o751);
      expect((await sandbox.exec("./script.sh")).stdout).toBe("two\n");
      await sandbox.files.writeFile("private.txt", "x", { mode: 0o600 });
      expect((await sandbox.files.stat("private.txt"))?.mode).toBe(0o600);

      await sandbox.exec("ln -sf target.txt link.txt");
      await sandbox.files.writeFile("link.txt", "through the link");
      expect(new TextDecoder().decode(await sandbox.files.readFile("target.txt"))).toBe(
        "through the link",
      );
      const linkType = await sandbox.exec("stat -c %F link.txt");
      expect(linkType.stdout).toBe("symbolic link\n");
    });

    it("creates parents unless told not to", async () => {
      await sandbox.files.writeFile("deep/er/file.txt", "x");
      expect((await sandbox.files.stat("deep/er"))?.type).toBe("directory");
      const error = await fileError(
        sandbox.files.writeFile("nowhere/file.txt", "x", { createParents: false }),
      );
      expect(error.reason).toBe("not_found");
      const underFile = await fileError(sandbox.files.writeFile("deep/er/file.txt/x", "x"));
      expect(underFile.reason).toBe("not_directory");
    });

    it("refuses writes on a read-only mount and the read-only root with reason read_only", async () => {
      expect(new TextDecoder().decode(await sandbox.files.readFile("/agent/readme.txt"))).toBe(
        "agent file\n",
      );
      const attempts = [
        () => sandbox.files.writeFile("/agent/readme.txt", "changed"),
        () => sandbox.files.writeFile("/agent/new.txt", "x"),
        () => sandbox.files.mkdir("/agent/dir"),
        () => sandbox.files.remove("/agent/readme.txt"),
        () => sandbox.files.rename("/agent/readme.txt", "/agent/moved.txt"),
        () => sandbox.files.writeFile("/etc/cordon.txt", "x"),
        () => sandbox.files.writeFile("/usr/bin/python3", "x"),
      ];
      for (const attempt of attempts) {
        const error = await fileError(attempt());
        expect(error.reason, error.message).toBe("read_only");
      }
      expect(new TextDecoder().decode(await sandbox.files.readFile("/agent/readme.txt"))).toBe(
        "agent file\n",
      );
    });

    it("uses the tmpfs mounts", async () => {
      await sandbox.files.writeFile("/tmp/scratch/a.txt", "tmp");
      await sandbox.files.writeFile("/var/tmp/b.txt", "var");
      expect(new TextDecoder().decode(await sandbox.files.readFile("/tmp/scratch/a.txt"))).toBe(
        "tmp",
      );
      const mounts = await sandbox.exec("findmnt -no FSTYPE /tmp");
      expect(mounts.stdout.trim()).toBe("tmpfs");
    });

    it("maps permission, missing, directory and size failures to their reasons", async () => {
      expect((await fileError(sandbox.files.readFile("/etc/shadow"))).reason).toBe(
        "permission_denied",
      );
      await sandbox.files.writeFile("locked/inner.txt", "secret");
      await sandbox.exec("chmod 000 locked");
      expect((await fileError(sandbox.files.readFile("locked/inner.txt"))).reason).toBe(
        "permission_denied",
      );
      expect((await fileError(sandbox.files.writeFile("locked/new.txt", "x"))).reason).toBe(
        "permission_denied",
      );
      await sandbox.exec("chmod 755 locked");
      expect((await fileError(sandbox.files.readFile("missing.txt"))).reason).toBe("not_found");
      expect((await fileError(sandbox.files.readFile("locked"))).reason).toBe("is_directory");
      expect((await fileError(sandbox.files.writeFile("locked", "x"))).reason).toBe("is_directory");
      const tooLarge = await fileError(sandbox.files.readFile("big.bin", { maxBytes: 1000 }));
      expect(tooLarge.reason).toBe("too_large");
      expect((await fileError(sandbox.files.readFile("/dev/zero"))).reason).toBe("other");
    });

    it("stats like stat(2): symlinks followed, a dangling one reported as a symlink", async () => {
      await sandbox.files.writeFile("stat/file.txt", "12345");
      await sandbox.exec(
        "cd stat && ln -s file.txt to-file && ln -s . to-dir && ln -s missing dangling",
      );
      const file = await sandbox.files.stat("stat/file.txt");
      expect(file).toMatchObject({ path: "/workspace/stat/file.txt", type: "file", size: 5 });
      expect(file?.mode).toBe(0o644);
      expect(file?.mtimeMs).toBeGreaterThan(Date.parse("2020-01-01"));
      expect((await sandbox.files.stat("stat/to-file"))?.type).toBe("file");
      expect((await sandbox.files.stat("stat/to-dir"))?.type).toBe("directory");
      expect((await sandbox.files.stat("stat/dangling"))?.type).toBe("symlink");
      expect(await sandbox.files.stat("stat/nothing")).toBeUndefined();
      expect(await sandbox.files.stat("stat/file.txt/under-a-file")).toBeUndefined();
      expect((await sandbox.files.stat("/dev/null"))?.type).toBe("other");

      const listing = await sandbox.files.list("stat");
      expect(listing.entries).toEqual([
        { name: "dangling", type: "symlink", size: expect.any(Number) as number },
        { name: "file.txt", type: "file", size: 5 },
        { name: "to-dir", type: "symlink", size: expect.any(Number) as number },
        { name: "to-file", type: "symlink", size: expect.any(Number) as number },
      ]);
    });

    it("lists with depth and limit, sorted, reporting truncation", async () => {
      for (const name of ["b/2.txt", "b/1.txt", "a/deep/x.txt", "c.txt", "tab\there.txt"]) {
        await sandbox.files.writeFile(`tree/${name}`, "x");
      }
      const shallow = await sandbox.files.list("tree");
      expect(shallow.entries.map((e) => e.name)).toEqual(["a", "b", "c.txt", "tab\there.txt"]);
      expect(shallow.truncated).toBe(false);
      const deep = await sandbox.files.list("/workspace/tree", { depth: 3 });
      expect(deep.entries.map((e) => `${e.name}:${e.type}`)).toEqual([
        "a:directory",
        "a/deep:directory",
        "a/deep/x.txt:file",
        "b:directory",
        "b/1.txt:file",
        "b/2.txt:file",
        "c.txt:file",
        "tab\there.txt:file",
      ]);
      const limited = await sandbox.files.list("tree", { depth: 3, limit: 3 });
      expect(limited.entries).toHaveLength(3);
      expect(limited.truncated).toBe(true);
      expect((await fileError(sandbox.files.list("tree/c.txt"))).reason).toBe("not_directory");
      expect((await fileError(sandbox.files.list("no-tree"))).reason).toBe("not_found");
    });

    it("mkdir -p, remove and rename with their failure reasons", async () => {
      await sandbox.files.mkdir("ops/a/b/c");
      await sandbox.files.mkdir("ops/a/b/c");
      expect((await sandbox.files.stat("ops/a/b/c"))?.type).toBe("directory");
      await sandbox.files.writeFile("ops/a/file.txt", "x");
      expect((await fileError(sandbox.files.mkdir("ops/a/file.txt"))).reason).toBe("not_directory");
      expect((await fileError(sandbox.files.mkdir("ops/a/file.txt/sub"))).reason).toBe(
        "not_directory",
      );

      expect((await fileError(sandbox.files.remove("ops/a"))).reason).toBe("other");
      await sandbox.files.remove("ops/a/file.txt");
      expect(await sandbox.files.stat("ops/a/file.txt")).toBeUndefined();
      await sandbox.files.remove("ops/a", { recursive: true });
      expect(await sandbox.files.stat("ops/a")).toBeUndefined();
      expect((await fileError(sandbox.files.remove("ops/a"))).reason).toBe("not_found");

      await sandbox.files.writeFile("ops/from.txt", "from");
      await sandbox.files.writeFile("ops/to.txt", "old");
      await sandbox.files.rename("ops/from.txt", "ops/to.txt");
      expect(new TextDecoder().decode(await sandbox.files.readFile("ops/to.txt"))).toBe("from");
      expect(await sandbox.files.stat("ops/from.txt")).toBeUndefined();
      await sandbox.files.rename("ops/to.txt", "/tmp/moved-across.txt");
      expect(new TextDecoder().decode(await sandbox.files.readFile("/tmp/moved-across.txt"))).toBe(
        "from",
      );
      expect((await fileError(sandbox.files.rename("ops/none", "ops/x"))).reason).toBe("not_found");
    });

    it("an aborted upload leaves the old content, never a partial file", async () => {
      await sandbox.files.writeFile("upload.bin", "old content");
      const controller = new AbortController();
      const big = randomBytes(40 * 1024 * 1024);
      const upload = sandbox.files.writeFile("upload.bin", big, { signal: controller.signal });
      setTimeout(() => controller.abort(), 5);
      const outcome = await upload.then(
        () => "written",
        (error: unknown) => (error instanceof AbortedError ? "aborted" : String(error)),
      );
      expect(["written", "aborted"]).toContain(outcome);
      // The in-container write may still be finishing; it ends with one of the two contents.
      let size = 0;
      for (let attempt = 0; attempt < 50; attempt++) {
        const temps = await sandbox.exec("ls -A | grep -c cordon-write || true");
        size = (await sandbox.files.stat("upload.bin"))?.size ?? -1;
        if (temps.stdout.trim() === "0") break;
        await sleep(100);
      }
      expect([11, big.byteLength]).toContain(size);
    });

    it("aborts a file operation with AbortedError", async () => {
      await expect(
        sandbox.files.readFile("big.bin", { signal: AbortSignal.abort() }),
      ).rejects.toBeInstanceOf(AbortedError);
    });
  });

  describe("background processes", () => {
    /** Polls until `done` holds for the output gathered so far (bounded number of polls). */
    async function pollUntil(
      id: string,
      done: (output: string, last: ProcessOutput) => boolean,
    ): Promise<string> {
      let output = "";
      for (let attempt = 0; attempt < 200; attempt++) {
        const polled = await sandbox.processes.poll(id);
        output += polled.output;
        if (done(output, polled)) return output;
        await sleep(50);
      }
      throw new Error(`process ${id} never got there; output so far: ${output}`);
    }

    it("starts, polls new output, takes stdin, lists and kills the whole tree", async () => {
      await sandbox.files.mkdir("sub");
      const info = await sandbox.processes.start(
        'echo "ready in $PWD as $ROLE"; while read -r line; do echo "got:$line"; done; sleep 1031 & sleep 1032',
        { cwd: "sub", env: { ROLE: "server" } },
      );
      expect(info).toMatchObject({ state: "running", exitCode: null });
      expect(info.id).toMatch(/^p-/);
      const first = await pollUntil(info.id, (out) => out.includes("ready"));
      expect(first).toBe("ready in /workspace/sub as server\n");
      // A poll returns only what is new.
      expect((await sandbox.processes.poll(info.id)).output).toBe("");

      await sandbox.processes.write(info.id, "hello\n");
      await sandbox.processes.write(info.id, "world\n");
      const echoed = await pollUntil(info.id, (out) => out.includes("got:world"));
      expect(echoed).toBe("got:hello\ngot:world\n");
      expect((await sandbox.processes.log(info.id)).output).toBe(
        "ready in /workspace/sub as server\ngot:hello\ngot:world\n",
      );

      const listed = await sandbox.processes.list();
      expect(listed.find((p) => p.id === info.id)).toMatchObject({
        state: "running",
        command: info.command,
      });

      const killed = await sandbox.processes.kill(info.id);
      expect(killed).toMatchObject({ id: info.id, state: "exited", exitCode: null });
      expect(await processesMatching("sleep 103")).toEqual([]);
      await expect(sandbox.processes.write(info.id, "late\n")).rejects.toThrow(/has exited/);
    });

    it("reports the exit code of a process that ends by itself", async () => {
      const info = await sandbox.processes.start("echo bye; exit 7");
      await pollUntil(info.id, (_, last) => last.info.state === "exited");
      const log = await sandbox.processes.log(info.id);
      expect(log.info).toMatchObject({ state: "exited", exitCode: 7 });
      expect(log.output).toBe("bye\n");
    });

    it("is the container's table: a new sandbox object for the container sees the processes", async () => {
      const info = await sandbox.processes.start("sleep 1041");
      const other = new DockerSandbox({
        engine: new DockerEngine(),
        containerId: container?.id ?? "",
        containerName: sandbox.id,
        workdir: "/workspace",
        user: "1000:1000",
      });
      expect((await other.processes.list()).map((p) => p.id)).toContain(info.id);
      await other.processes.kill(info.id);
      expect((await sandbox.processes.poll(info.id)).info.state).toBe("exited");
    });

    it("refuses unknown ids and a bad working directory clearly", async () => {
      for (const id of ["p-000000000000", "../../etc", "nope"]) {
        const error = await fileError(sandbox.processes.poll(id));
        expect(error.reason).toBe("not_found");
        expect(error.message).toMatch(/no background process/);
      }
      expect((await fileError(sandbox.processes.kill("p-000000000000"))).reason).toBe("not_found");
      expect((await fileError(sandbox.processes.start("true", { cwd: "nope" }))).reason).toBe(
        "not_found",
      );
    });
  });

  describe("tree copies", () => {
    let hostRoot: string;

    beforeAll(async () => {
      hostRoot = await mkdtemp(path.join(tmpdir(), "cordon-ds-tree-"));
    });

    afterAll(async () => {
      await rm(hostRoot, { recursive: true, force: true });
    });

    it("copies a host tree in and back out, byte for byte, symlinks kept", async () => {
      const source = path.join(hostRoot, "source");
      await mkdir(path.join(source, "src/nested"), { recursive: true });
      const binary = randomBytes(200_000);
      await writeFile(path.join(source, "src/nested/data.bin"), binary);
      await writeFile(path.join(source, "-leading dash.txt"), "dash\n");
      await writeFile(path.join(source, "run.sh"), "#!/bin/sh\n", { mode: 0o755 });
      await symlink("src/nested/data.bin", path.join(source, "link"));

      await sandbox.files.copyTreeIn(source, "copied");
      expect(
        Buffer.from(await sandbox.files.readFile("copied/src/nested/data.bin")).equals(binary),
      ).toBe(true);
      expect((await sandbox.files.stat("copied/run.sh"))?.mode).toBe(0o755);
      expect((await sandbox.exec("stat -c %u copied/run.sh")).stdout).toBe("1000\n");
      expect((await sandbox.exec("readlink copied/link")).stdout).toBe("src/nested/data.bin\n");

      const back = path.join(hostRoot, "back");
      const result = await sandbox.files.copyTreeOut("copied", back);
      expect(result.entries).toBe(6);
      expect(result.bytes).toBe(binary.byteLength + 5 + 10);
      expect((await readFile(path.join(back, "src/nested/data.bin"))).equals(binary)).toBe(true);
      expect(await readFile(path.join(back, "-leading dash.txt"), "utf8")).toBe("dash\n");
      expect(await readlink(path.join(back, "link"))).toBe("src/nested/data.bin");
    });

    it("refuses a tree whose symlink points at the host's /etc, writing nothing", async () => {
      await sandbox.exec("mkdir -p evil && echo ok > evil/fine.txt && ln -s /etc evil/etc");
      const target = path.join(hostRoot, "evil-out");
      const error = await sandbox.files.copyTreeOut("evil", target).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(SandboxError);
      expect((error as Error).message).toMatch(/"etc" is a symbolic link to an absolute path/);
      await expect(stat(target)).rejects.toThrow(/ENOENT/);
    });

    it("refuses a tree whose symlink climbs out with ../", async () => {
      await sandbox.exec("mkdir -p climb/a && ln -s ../../../../etc/passwd climb/a/passwd");
      await expect(
        sandbox.files.copyTreeOut("climb", path.join(hostRoot, "climb")),
      ).rejects.toThrow(/leaving the tree/);
    });

    it("holds the byte cap and fails clearly for a missing directory", async () => {
      await expect(
        sandbox.files.copyTreeOut("copied", path.join(hostRoot, "capped"), { maxBytes: 1000 }),
      ).rejects.toThrow(/limit of 1000 bytes/);
      const missing = await fileError(
        sandbox.files.copyTreeOut("no-such-dir", path.join(hostRoot, "x")),
      );
      expect(missing.reason).toBe("not_found");
    });
  });

  const transports = [
    { name: "the resident executor", executor: "resident" as const },
    { name: "plain exec", executor: "exec" as const },
  ];

  describe("when an output callback throws", () => {
    // The kill goes out as the first output arrives: just when `bash -c 'echo go; sleep N'` turns
    // itself into `sleep` by exec. For a moment a process in an exec shows no environment, so no
    // marker, and the sweep missed the sleep about one time in ten (16 of 150 in a loop), which
    // then ran on. Several tries, so a sweep that misses it again is likely caught.
    it.each(transports)(
      "the call fails and nothing is left running, every time ($name)",
      async ({ executor }) => {
        const { container: own, sandbox: target } = await startedSandbox(
          testSandboxSpec("throwing-callback", { docker: { executor } }),
          executor === "resident"
            ? await testExecutorVolume(await requireSandboxImage())
            : undefined,
        );
        try {
          const left: string[] = [];
          for (let attempt = 0; attempt < 8; attempt += 1) {
            const sleeper = `sleep ${1051 + attempt}`;
            const run = target.exec(`echo go; ${sleeper}`, {
              onStdout: () => {
                throw new Error("renderer broke");
              },
            });
            await expect(run).rejects.toThrow(/renderer broke/);
            // The tree's kill is sent before the call rejects; the kernel ends it a moment later,
            // so look again briefly rather than at once.
            left.push(...(await processesGone(sleeper, target)));
          }
          expect(left).toEqual([]);
        } finally {
          await removeContainer(own);
        }
      },
      120_000,
    );
  });

  describe("when the container goes away", () => {
    it("a command running when the container is killed fails with a clear SandboxError", async () => {
      const { container: doomed, sandbox: victim } = await startedSandbox(
        testSandboxSpec("doomed"),
      );
      try {
        const running = victim.exec("echo started; sleep 600", {
          onStdout: () => void doomed.kill().catch(() => undefined),
        });
        const error = await running.then(
          () => undefined,
          (caught: unknown) => caught,
        );
        expect(error).toBeInstanceOf(SandboxError);
        expect((error as SandboxError).message).toMatch(/stopped|gone|not running/);
        expect((error as SandboxError).fix).toMatch(/fresh sandbox/);
        await removeContainer(doomed);
        const after = await victim.files.readFile("/etc/hostname").then(
          () => undefined,
          (caught: unknown) => caught,
        );
        expect(after).toBeInstanceOf(SandboxError);
        expect((after as SandboxError).message).toMatch(/gone or not running/);
      } finally {
        await removeContainer(doomed);
      }
    });
  });

  describe("under a fork bomb", () => {
    // The resident executor kills in-process; plain exec starts a process for the kill, which a
    // full pids limit refuses now and then (Docker's 126): it must be started again until it gets
    // in, or the bomb outlives its timeout and every later command hangs.
    it.each(transports)(
      "a timeout kills a bomb that holds every pid, and the next command works ($name)",
      async ({ executor }) => {
        const { container: bombed, sandbox: target } = await startedSandbox(
          testSandboxSpec("bomb", { docker: { pidsLimit: 64, executor } }),
          executor === "resident"
            ? await testExecutorVolume(await requireSandboxImage())
            : undefined,
        );
        try {
          expect((await target.exec("echo ready")).stdout).toBe("ready\n");
          // Python forks without bash's retry backoff: every pid stays taken by a sleeping child.
          const bomb = await target.exec(
            `python3 -c '
import os, time
while True:
    try:
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
    except OSError:
        time.sleep(0.01)
'`,
            { timeoutMs: 2000 },
          );
          expect(bomb).toMatchObject({ timedOut: true, exitCode: null });
          // The kill is done before the call returns, but the dying children are reaped as the
          // kernel gets to them: on a loaded machine the next command may still find no pid for a
          // moment. Each probe is bounded, so a bomb that survived fails here, not by a hang.
          const probe = () =>
            target.exec("echo alive; ps -eo args= | grep -c '^python3' || true", {
              timeoutMs: 10_000,
            });
          let next = await probe();
          for (let attempt = 0; attempt < 5 && next.stdout !== "alive\n0\n"; attempt += 1) {
            await sleep(200);
            next = await probe();
          }
          expect(next.stdout).toBe("alive\n0\n");
        } finally {
          await removeContainer(bombed);
        }
      },
    );
  });
});
