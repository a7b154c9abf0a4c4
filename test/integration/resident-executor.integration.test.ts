import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { SandboxError } from "../../src/common/index.js";
import { DockerEngine, DockerSandbox } from "../../src/sandbox/index.js";
import { startDockerToolSandbox, type DockerToolSandbox } from "../support/tool-runner.js";

/** A bash line printing the resident executor's pid (empty when none runs). */
const executorPid = "pgrep -x -u 1000 executor || true";

/**
 * The resident executor (sandbox.docker.executor "resident") against a real hardened container:
 * calls go over its stream, and a process in the sandbox (same uid as the executor) can neither
 * speak on that stream nor read it, and killing the executor costs at most the call that did it.
 */
describe("resident executor", () => {
  let box: DockerToolSandbox;

  beforeAll(async () => {
    box = await startDockerToolSandbox({ name: "resident" });
  });

  afterAll(async () => {
    await box?.dispose();
  });

  /**
   * The name of the process that started a command's shell: the executor itself, which does
   * the exec wrapper's work (a plain exec runs the wrapper's bash in between).
   */
  const launcherOfCommands = 'tr -d "\\n" </proc/$PPID/comm; echo';

  it("runs commands and file operations through it, as the sandbox user", async () => {
    const { sandbox } = box;
    const launcher = await sandbox.exec(launcherOfCommands);
    expect(launcher.stdout).toBe("executor\n");
    const pid = (await sandbox.exec(executorPid)).stdout.trim();
    expect(pid).toMatch(/^\d+$/);
    expect((await sandbox.exec(`ps -o user=,args= -p ${pid}`)).stdout.trim()).toMatch(
      /^\S+\s+\/\.cordon\/executor$/,
    );
    // Not dumpable: its descriptors are root's, whatever uid it runs as.
    expect((await sandbox.exec(`stat -c %u /proc/${pid}/fd`)).stdout).toBe("0\n");

    await sandbox.files.writeFile("notes/a.txt", "first\n");
    expect(new TextDecoder().decode(await sandbox.files.readFile("notes/a.txt"))).toBe("first\n");
    expect(await sandbox.files.stat("notes/a.txt")).toMatchObject({ type: "file", size: 6 });
    expect((await sandbox.exec("stat -c '%u %a' notes/a.txt")).stdout).toBe("1000 644\n");
  });

  it("cannot be replaced from inside: its volume is read-only and root's", async () => {
    const { sandbox } = box;
    expect((await sandbox.exec("stat -c '%u %a' /.cordon /.cordon/executor")).stdout).toBe(
      "0 755\n0 755\n",
    );
    for (const attempt of [
      "printf x >/.cordon/executor",
      "cp /bin/true /.cordon/evil",
      "mv /.cordon/executor /.cordon/old",
    ]) {
      const result = await sandbox.exec(`(${attempt}) 2>&1`);
      expect(result.exitCode, attempt).not.toBe(0);
      expect(result.stdout).toMatch(/Read-only file system|Permission denied/);
    }
    expect((await sandbox.exec(launcherOfCommands)).stdout).toBe("executor\n");
  });

  it("is one per container: a second sandbox object over it (a new lease) shares it", async () => {
    const other = new DockerSandbox({
      engine: new DockerEngine(),
      containerId: box.container.id,
      containerName: box.sandbox.id,
      workdir: "/workspace",
      user: "1000:1000",
      executor: "resident",
    });
    expect((await other.exec("echo from-other")).stdout).toBe("from-other\n");
    expect((await box.sandbox.exec("pgrep -c -x executor")).stdout).toBe("1\n");
  });

  it("gives each command its own pipes: nothing of the executor's is open in it", async () => {
    // The command's shell holds stdin, stdout and stderr, no more.
    const fds = await box.sandbox.exec("ls /proc/$$/fd >/tmp/fds; tr '\\n' ' ' </tmp/fds");
    expect(fds.stdout).toBe("0 1 2 ");
    const stdin = await box.sandbox.exec("readlink /proc/$$/fd/0");
    expect(stdin.stdout).toBe("/dev/null\n");
  });

  it("keeps concurrent calls apart: each gets its own output and exit code", async () => {
    const calls = Array.from({ length: 24 }, (_, index) =>
      box.sandbox.exec(`head -c ${20_000 + index} /dev/zero | tr '\\0' x; echo; exit ${index}`),
    );
    const results = await Promise.all(calls);
    results.forEach((result, index) => {
      expect(result.exitCode).toBe(index);
      expect(result.stdout).toBe(`${"x".repeat(20_000 + index)}\n`);
    });
  });

  it("cannot be written to or read by a process of the same uid (no forged frames)", async () => {
    const { sandbox } = box;
    const pid = (await sandbox.exec(executorPid)).stdout.trim();
    // The control: the same write into an ordinary same-uid process's stdout works...
    const control = await sandbox.exec(
      "sleep 30 > /tmp/control.out & pid=$!; sleep 0.2; printf forged > /proc/$pid/fd/1 && echo written; kill $pid; cat /tmp/control.out",
    );
    expect(control.stdout).toBe("written\nforged");
    // ...and is refused for the executor: its descriptors, memory and environment are root's.
    // A frame that would claim call 1 exited 0 with output "forged":
    const frame = String.raw`\x4f\x00\x00\x00\x01\x00\x00\x00\x06forged\x58\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00\x00`;
    const attack = await sandbox.exec(
      [
        `printf '${frame}' > /proc/${pid}/fd/1 && echo wrote-stdout`,
        `timeout 1 cat /proc/${pid}/fd/0 && echo read-stdin`,
        `head -c 1 /proc/${pid}/mem && echo read-mem`,
        `tr '\\0' '\\n' < /proc/${pid}/environ && echo read-environ`,
        `python3 -c 'import ctypes,sys; libc=ctypes.CDLL(None, use_errno=True); sys.exit(0 if libc.ptrace(16, ${pid}, 0, 0) == 0 else ctypes.get_errno())' && echo attached`,
        "echo done",
      ].join("; "),
    );
    expect(attack.stdout).toBe("done\n");
    expect(attack.stderr).toContain("Permission denied");
    // The stream is intact: the next calls answer truly.
    const after = await sandbox.exec("echo real; exit 7");
    expect(after).toMatchObject({ stdout: "real\n", exitCode: 7 });
    expect((await sandbox.exec(executorPid)).stdout.trim()).toBe(pid);
  });

  it("stopped from inside (kill -STOP): the call fails instead of hanging, and the next one works", async () => {
    const { sandbox } = box;
    const pid = (await sandbox.exec(executorPid)).stdout.trim();
    const stopping = await sandbox.exec(`kill -STOP ${pid}; echo stopped`).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect((stopping as SandboxError).message).toMatch(/resident executor .* stopped/);
    expect(await sandbox.exec("echo next")).toMatchObject({ stdout: "next\n", exitCode: 0 });
    // The stopped one was killed, not left behind; a new one runs.
    expect((await sandbox.exec(`ps -o stat= -p ${pid} || echo gone`)).stdout).toBe("gone\n");
    expect((await sandbox.exec(launcherOfCommands)).stdout).toBe("executor\n");
  });

  it("killed from inside (kill -9), costs only that call: the next ones work and it comes back", async () => {
    const { sandbox } = box;
    const pid = (await sandbox.exec(executorPid)).stdout.trim();
    const killing = await sandbox.exec(`kill -9 ${pid}; sleep 1; echo never`).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(killing).toBeInstanceOf(SandboxError);
    expect((killing as SandboxError).message).toMatch(/resident executor .* stopped/);

    // The next call goes by plain exec while a new executor starts.
    const next = await sandbox.exec("echo after; exit 3");
    expect(next).toMatchObject({ stdout: "after\n", exitCode: 3 });
    await sandbox.files.writeFile("after-kill.txt", "still right\n");
    expect(new TextDecoder().decode(await sandbox.files.readFile("after-kill.txt"))).toBe(
      "still right\n",
    );
    expect((await sandbox.exec(launcherOfCommands)).stdout).toBe("executor\n");
    const again = (await sandbox.exec(executorPid)).stdout.trim();
    expect(again).toMatch(/^\d+$/);
    expect(again).not.toBe(pid);
    // Nothing of the killed call is left running.
    expect((await sandbox.exec("pgrep -f 'echo [n]ever' || true")).stdout).toBe("");
  });
});

describe("executor switch", () => {
  it('"exec" starts no executor; a missing binary falls back to plain exec', async () => {
    const plain = await startDockerToolSandbox({
      name: "plain-exec",
      docker: { executor: "exec" },
    });
    const missing = await startDockerToolSandbox({ name: "no-binary", executorBinary: undefined });
    try {
      for (const { sandbox } of [plain, missing]) {
        const result = await sandbox.exec(`echo hi; ${executorPid}`);
        expect(result).toMatchObject({ stdout: "hi\n", exitCode: 0 });
        await sandbox.files.writeFile("x.txt", "content");
        expect(new TextDecoder().decode(await sandbox.files.readFile("x.txt"))).toBe("content");
      }
    } finally {
      await plain.dispose();
      await missing.dispose();
    }
  });
});
