/**
 * Reaching a sandbox as a person at a terminal does, with the built CLI in a real container:
 * `cordon exec -i` pipes stdin through byte for byte and returns the command's exit code;
 * `cordon exec -it -- bash` on a pseudo-terminal is an interactive shell that follows resizes and
 * gives the terminal back in cooked mode; `--rm` on run and exec leaves no container or private
 * copy behind, whether the run succeeded or failed.
 */
import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { access, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createRunner } from "../../src/runner/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { builtCli, cordonOnTerminal, runBuiltCordon } from "../support/spawn-cordon.js";
import { removeStateDirectory } from "../support/state-directory.js";

const suffix = `${process.pid}-${Date.now().toString(36)}`;

describe("cordon exec -i/-t and --rm", () => {
  let home: string;
  let repo: string;
  let scratch: string;
  const sessions: string[] = [];

  const env = (): NodeJS.ProcessEnv => ({
    PATH: process.env["PATH"],
    HOME: process.env["HOME"],
    CORDON_HOME: home,
    CORDON_LOG_LEVEL: "silent",
  });

  function session(name: string): string {
    const key = `${name}-${suffix}`;
    sessions.push(key);
    return key;
  }

  const cordon = (args: string[], input?: Buffer | string) =>
    runBuiltCordon(args, { env: env(), cwd: repo, input });

  async function containerOf(sessionKey: string): Promise<string> {
    const plan = await createRunner({ env: env(), workspace: repo }).plan({ sessionKey });
    const name = plan.sandbox.spec?.containerName;
    if (!name) throw new Error("the plan has no container");
    return name;
  }

  const exists = (name: string) =>
    dockerClient()
      .getContainer(name)
      .inspect()
      .then(
        () => true,
        () => false,
      );

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-exec-interactive-"));
    scratch = await mkdtemp(path.join(tmpdir(), "cordon-exec-interactive-scripts-"));
    repo = await demoRepo();
  });
  afterAll(async () => {
    for (const key of sessions) {
      await dockerClient()
        .getContainer(await containerOf(key))
        .remove({ force: true })
        .catch(() => undefined);
    }
    await removeStateDirectory(home);
    await rm(scratch, { recursive: true, force: true });
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("exec -i streams stdin through byte for byte and exits with the command's code", async () => {
    const shared = session("pipe");
    const input = randomBytes(3 * 1024 * 1024);
    const piped = await cordon(
      ["exec", "-i", "--session", shared, "--", "sha256sum | cut -d' ' -f1; exit 5"],
      input,
    );
    expect(piped.stderr).not.toContain("cordon:");
    expect(piped.code).toBe(5);
    expect(piped.stdout.toString().trim()).toBe(createHash("sha256").update(input).digest("hex"));

    // What came in is the command's to keep, in the sandbox's files.
    const kept = await cordon(
      ["exec", "-i", "--session", shared, "--", "cat > note.txt"],
      "from the pipe\n",
    );
    expect(kept.code).toBe(0);
    const read = await cordon(["exec", "--session", shared, "--", "cat", "note.txt"]);
    expect(read.stdout.toString()).toBe("from the pipe\n");

    // Without a terminal on stdin, -t is refused before anything runs (as docker exec -t).
    const noTerminal = await cordon(["exec", "-t", "--session", shared, "--", "bash"], "x\n");
    expect(noTerminal.code).toBe(2);
    expect(noTerminal.stderr).toContain("-t needs a terminal on stdin");
  });

  it("exec -it -- bash on a terminal is a shell: its own pty, resizes followed, exit 3 is cordon's exit 3, the terminal restored", async () => {
    const result = await cordonOnTerminal(
      [
        { expect: "$ " },
        { send: "tty; stty size; echo shell-$((6*7))\n" },
        { expect: "shell-42" },
        { resize: [40, 120] },
        // The new size reaches the pty asynchronously: the shell looks until it has it.
        {
          send: "for i in $(seq 100); do [ \"$(stty size)\" = '40 120' ] && break; sleep 0.1; done; echo size-now $(stty size)\n",
        },
        { expect: "size-now " },
        { send: "exit 3\n" },
      ],
      ["exec", "-it", "--session", session("shell"), "--", "bash"],
      { env: env(), cwd: repo },
    );
    expect(result.output).toMatch(/\/dev\/pts\/\d+/);
    expect(result.output).toContain("24 80");
    expect(result.output).toContain("size-now 40 120");
    expect(result.exitCode).toBe(3);
    // Raw mode was given back: the next command at this terminal gets line editing and echo.
    expect(result).toMatchObject({ canonical: true, echo: true });
  });

  it("an interrupted exec -i leaves nothing running in the sandbox (docker exec would leave the command)", async () => {
    const key = session("hangup");
    const child = spawn(
      process.execPath,
      [builtCli, "exec", "-i", "--session", key, "--", "cat; echo never"],
      { env: env(), cwd: repo, stdio: ["pipe", "pipe", "pipe"] },
    );
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    // Its stdin stays open: cat waits on it.
    child.stdin.write("still here\n");
    const name = await containerOf(key);
    const processes = async () => {
      const top = (await dockerClient()
        .getContainer(name)
        .top()
        .catch(() => ({ Processes: [] }))) as { Processes: string[][] };
      return top.Processes.map((row) => row.at(-1) ?? "");
    };
    await expect
      .poll(processes, { timeout: 60_000 })
      .toContainEqual(expect.stringMatching(/^cat$/));
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.kill("SIGTERM");
    // 128 + 15, as a shell reports a command stopped by SIGTERM, and one line saying so.
    expect(await exited).toBe(143);
    expect(stderr).toMatch(
      /cordon: SIGTERM: stopped the command \(its processes in the sandbox are killed\)/,
    );
    await expect
      .poll(processes, { timeout: 30_000 })
      .not.toContainEqual(expect.stringMatching(/^(cat|\/bin\/sh -c cat)/));
  });

  it("the command's last stderr line cannot run into cordon's own: cordon's line starts a new line", async () => {
    const forged = await cordon([
      "exec",
      "--session",
      session("forge"),
      "--timeout",
      "2s",
      "--",
      "printf 'all good, says ' >&2; sleep 30",
    ]);
    expect(forged.stderr).toContain(
      "all good, says \ncordon: the command timed out and was killed\n",
    );
  });

  it("a workspace file name with terminal escapes is shown, never obeyed, in exec's progress lines", async () => {
    // Seeding skips a FIFO and names it in a warning: the name is the repository's choice.
    const workspace = await mkdtemp(path.join(tmpdir(), "cordon-hostile-names-"));
    try {
      await writeFile(path.join(workspace, "README"), "plain\n");
      const evil = "evil\u001b]2;pwned\u0007\u001b[2K\rcordon: all fine";
      execFileSync("mkfifo", [path.join(workspace, evil)]);
      const key = session("names");
      const result = await cordon([
        "exec",
        "--workspace",
        workspace,
        "--session",
        key,
        "--",
        "true",
      ]);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).toContain(
        "evil\\u001b]2;pwned\\u0007\\u001b[2K\\u000dcordon: all fine (",
      );
      // eslint-disable-next-line no-control-regex
      expect(result.stderr).not.toMatch(/[\u0000-\u0009\u000b-\u001f]/);
      const plan = await createRunner({ env: env(), workspace }).plan({ sessionKey: key });
      await dockerClient()
        .getContainer(plan.sandbox.spec?.containerName ?? "")
        .remove({ force: true })
        .catch(() => undefined);
    } finally {
      await rm(workspace, { recursive: true, force: true });
    }
  });

  it("run --rm and exec --rm leave no container and no private copy, after a success and after a failure", async () => {
    const script = async (name: string, turns: unknown[]) => {
      const file = path.join(scratch, `${name}.json`);
      await writeFile(file, JSON.stringify({ version: 1, turns }));
      return file;
    };
    const workspaceOf = async (key: string) =>
      path.join(home, "workspaces", await containerOf(key));
    const gone = async (key: string) => {
      expect(await exists(await containerOf(key))).toBe(false);
      await expect(access(await workspaceOf(key))).rejects.toThrow();
    };

    const succeeded = session("rm-ok");
    const ok = await cordon([
      "run",
      "--rm",
      "--session",
      succeeded,
      "--model-script",
      await script("ok", [
        {
          content: [{ type: "tool_use", name: "exec", input: { command: "echo made > made.txt" } }],
        },
        { content: [{ type: "text", text: "done" }] },
      ]),
      "make a file",
    ]);
    expect(ok.code).toBe(0);
    expect(ok.stderr).toContain(`--rm: removed ${await containerOf(succeeded)}`);
    await gone(succeeded);

    const failed = session("rm-failed");
    const bad = await cordon([
      "run",
      "--rm",
      "--session",
      failed,
      "--model-script",
      await script("failed", [
        {
          content: [{ type: "tool_use", name: "exec", input: { command: "echo made > made.txt" } }],
        },
        { error: { kind: "auth", message: "invalid x-api-key" } },
      ]),
      "make a file",
    ]);
    expect(bad.code).not.toBe(0);
    await gone(failed);

    const execFailed = session("rm-exec");
    const viaExec = await cordon(["exec", "--rm", "--session", execFailed, "--", "exit 9"]);
    expect(viaExec.code).toBe(9);
    await gone(execFailed);
  });
});
