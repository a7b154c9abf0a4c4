/**
 * SIGTERM and SIGINT end a command cleanly, through the built CLI as a user or CI runs it: exit
 * 143 / 130, one line saying what was stopped and what is left, no internal error text, and no
 * wait file or session lock left behind; a second signal forces.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { git } from "../support/demo-repo.js";
import { requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { builtCli, cordonOnTerminal } from "../support/spawn-cordon.js";
import { removeStateDirectory } from "../support/state-directory.js";

const sandboxUid = process.getuid?.() === 0 ? 1000 : (process.getuid?.() ?? 1000);

interface Started {
  child: ChildProcessWithoutNullStreams;
  stderr: () => string;
  stdout: () => string;
  exited: Promise<number | null>;
}

describe("signals end commands cleanly", () => {
  let root: string;
  let home: string;
  let project: string;
  let script: string;
  const env = (): NodeJS.ProcessEnv => ({
    ...process.env,
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    CORDON_LOG_LEVEL: "silent",
  });

  /** `cordon <args>` (the built CLI) in the project, as a child process. */
  function start(args: string[]): Started {
    const child = spawn(process.execPath, [builtCli, ...args], {
      cwd: project,
      env: env(),
      stdio: "pipe",
    });
    let stderr = "";
    let stdout = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stdin.end();
    const exited = new Promise<number | null>((resolve) =>
      child.on("exit", (code, signal) => resolve(code ?? (signal as unknown as number))),
    );
    return { child, stderr: () => stderr, stdout: () => stdout, exited };
  }

  /** `cordon run` on session `s` whose one tool call sleeps, as a child process. */
  function startRun(session: string, ...flags: string[]): Started {
    return start(["run", "--model-script", script, "--session", session, ...flags, "go"]);
  }

  /** Every file under the sessions folder, by base name. */
  async function sessionFiles(): Promise<string[]> {
    const entries = await readdir(path.join(home, "sessions"), {
      recursive: true,
      withFileTypes: true,
    }).catch(() => []);
    return entries.filter((e) => e.isFile()).map((e) => e.name);
  }
  const has = async (pattern: RegExp) => (await sessionFiles()).some((n) => pattern.test(n));

  const internalText = /sleep was aborted|CORDON_DEBUG|press Ctrl-C|stack/;

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-signals-"));
    home = path.join(root, "home");
    project = path.join(root, "shop");
    await mkdir(project);
    await writeFile(path.join(project, "file.txt"), "base\n");
    git(project, "init", "-q");
    git(project, "add", "-A");
    git(project, "commit", "-qm", "init");
    if (process.getuid?.() === 0) {
      execFileSync("chown", ["-R", `${sandboxUid}:${sandboxUid}`, project]);
    }
    script = path.join(root, "slow.json");
    await writeFile(
      script,
      JSON.stringify({
        version: 1,
        turns: [
          { content: [{ type: "tool_use", name: "exec", input: { command: "sleep 60" } }] },
          { content: [{ type: "text", text: "done" }] },
        ],
      }),
    );
  });

  afterAll(async () => {
    await runCordon(["sandbox", "rm", "--all", "--discard-changes"], {
      CORDON_HOME: home,
      CORDON_CONFIG: "",
    });
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
  });

  it("SIGTERM on a run waiting for a busy session: 143, one line, its wait file gone; SIGINT on the holder: 130, its lock gone", async () => {
    const holder = startRun("busy");
    try {
      await expect.poll(() => holder.stderr(), { timeout: 60_000 }).toContain("→ exec");
      const waiter = startRun("busy");
      await expect.poll(() => has(/\.lock\.wait\./), { timeout: 30_000 }).toBe(true);

      waiter.child.kill("SIGTERM");
      expect(await waiter.exited).toBe(143);
      const waiterLines = waiter.stderr().trimEnd().split("\n");
      expect(waiterLines.at(-1)).toMatch(
        /^cordon: SIGTERM: stopped waiting for session agent:main:busy, which a run holds \(pid \d+ on .*\); nothing ran$/,
      );
      expect(waiter.stderr()).not.toMatch(internalText);
      expect(await has(/\.lock\.wait\./)).toBe(false);
      expect(await has(/\.lock$/)).toBe(true);

      holder.child.kill("SIGINT");
      expect(await holder.exited).toBe(130);
      expect(holder.stderr().trimEnd().split("\n").at(-1)).toBe(
        "cordon: SIGINT: stopped the run of agent:main:busy after 1 turn; the sandbox keeps the session's files: `cordon run --session busy` continues it",
      );
      expect(holder.stderr()).not.toMatch(internalText);
      expect(await has(/\.lock$/)).toBe(false);
    } finally {
      holder.child.kill("SIGKILL");
    }
  });

  it("a run stopped by SIGTERM records the exit code it exits with: run-end says 143 in stream-json and the events file", async () => {
    const run = startRun("recorded", "--output-format", "stream-json");
    try {
      await expect.poll(() => run.stdout(), { timeout: 60_000 }).toContain('"tool-call"');
      run.child.kill("SIGTERM");
      expect(await run.exited, run.stderr()).toBe(143);
      const ends = run
        .stdout()
        .trimEnd()
        .split("\n")
        .map((line) => JSON.parse(line) as { type: string; status?: string; exitCode?: number })
        .filter((record) => record.type === "run-end");
      expect(ends).toMatchObject([{ status: "aborted", exitCode: 143 }]);
      const logs = await runCordon(
        ["logs", "--json", "--session", "recorded", "--workspace", project],
        { CORDON_HOME: home, CORDON_CONFIG: "" },
      );
      const stored = logs.stdout
        .trimEnd()
        .split("\n")
        .map((line) => JSON.parse(line) as { type: string; exitCode?: number })
        .filter((record) => record.type === "run-end");
      expect(stored.map((record) => record.exitCode)).toEqual([143]);
      expect(run.stderr()).not.toMatch(internalText);
      expect(await has(/\.lock(\.wait\..*)?$/)).toBe(false);
    } finally {
      run.child.kill("SIGKILL");
    }
  });

  /**
   * `cordon exec -it -- sh` on a pseudo-terminal (test/support/pty-session.py), sent `signal` with
   * `kill` once the shell's prompt shows: Ctrl-C typed at the terminal goes to the shell (raw
   * mode), so a stop signal reaches cordon only from another program, as here.
   */
  async function interactiveShellStoppedBy(signal: "SIGTERM" | "SIGINT") {
    return cordonOnTerminal(
      [{ expect: "$ " }, { signal }],
      ["exec", "-it", "--session", `tty-${signal}`, "--", "sh"],
      { env: { ...env(), PS1: "$ " }, cwd: project },
    );
  }

  const stoppedExec =
    "stopped the command (its processes in the sandbox are killed); the sandbox keeps its files: `cordon exec` with the same --session runs in it again";

  it("exec -it on a terminal: SIGTERM gives 143 and SIGINT 130, one line each, the terminal given back", async () => {
    const terminated = await interactiveShellStoppedBy("SIGTERM");
    expect(terminated.exitCode, terminated.output).toBe(143);
    const cordonLines = (output: string) =>
      output.split(/\r?\n/).filter((line) => line.includes("cordon:"));
    // On a line of its own, not after the shell's prompt.
    expect(cordonLines(terminated.output)).toEqual([`cordon: SIGTERM: ${stoppedExec}`]);
    expect(terminated.output).not.toMatch(internalText);
    expect(terminated).toMatchObject({ canonical: true, echo: true });

    const interrupted = await interactiveShellStoppedBy("SIGINT");
    expect(interrupted.exitCode, interrupted.output).toBe(130);
    // A SIGINT is acknowledged on a terminal (a person may be waiting), then the one final line.
    expect(cordonLines(interrupted.output).at(-1)).toBe(`cordon: SIGINT: ${stoppedExec}`);
    expect(interrupted.output).not.toMatch(internalText);
    expect(interrupted).toMatchObject({ canonical: true, echo: true });
    expect(await has(/\.lock(\.wait\..*)?$/)).toBe(false);
  });

  it("fix-tests stopped in its setup phase: SIGTERM 143, SIGINT 130, one line, result.json agrees, no lock, sandbox or copy left", async () => {
    for (const [signal, code] of [
      ["SIGTERM", 143],
      ["SIGINT", 130],
    ] as const) {
      const out = path.join(root, `fix-tests-${signal}`);
      const job = start([
        "fix-tests",
        "--test-cmd",
        "false",
        "--setup-cmd",
        "sleep 60",
        "--model-script",
        script,
        "--out",
        out,
        "--json",
      ]);
      try {
        await expect
          .poll(() => job.stderr(), { timeout: 60_000 })
          .toContain("==> running the setup command `sleep 60`");
        // The setup command itself is running in its sandbox, not the sandbox still starting.
        await new Promise((resolve) => setTimeout(resolve, 1500));
        job.child.kill(signal);
        expect(await job.exited, job.stderr()).toBe(code);
        const lines = job.stderr().trimEnd().split("\n");
        expect(lines.filter((line) => line.startsWith(`cordon: ${signal}`))).toEqual([
          `cordon: ${signal}: stopped fix-tests; your workspace is unchanged (fix-tests never writes to it), what it wrote so far is in ${out}`,
        ]);
        expect(job.stderr()).not.toMatch(internalText);
        expect(job.stdout()).not.toMatch(internalText);
        // After the signal's line, nothing more on stderr.
        expect(lines.at(-1)).toMatch(new RegExp(`^cordon: ${signal}: stopped fix-tests`));
        const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as {
          exitCode: number;
          message: string;
        };
        expect(result).toMatchObject({ exitCode: code, message: `stopped by ${signal}` });
        expect(JSON.parse(job.stdout())).toMatchObject({ exitCode: code });
        expect(await has(/\.lock(\.wait\..*)?$/)).toBe(false);
        // Its sandbox goes, and so does the copy seeded before the stop (it was left an orphan).
        const listed = await runCordon(["sandbox", "list", "--json"], env());
        const { sandboxes, orphans } = JSON.parse(listed.stdout) as {
          sandboxes: { name: string }[];
          orphans: { path: string }[];
        };
        expect(sandboxes.filter((s) => s.name.includes("fix-tests"))).toEqual([]);
        expect(orphans.filter((o) => o.path.includes("fix-tests"))).toEqual([]);
      } finally {
        job.child.kill("SIGKILL");
      }
    }
  });

  it("a second signal forces the exit, and the session lock still goes", async () => {
    const run = startRun("forced");
    try {
      await expect.poll(() => run.stderr(), { timeout: 60_000 }).toContain("→ exec");
      expect(await has(/\.lock$/)).toBe(true);
      run.child.kill("SIGTERM");
      // Apart: two pending signals of one kind are one to the kernel. The graceful stop may
      // win the race; either way the code is 143 and the line names the run.
      await new Promise((resolve) => setTimeout(resolve, 20));
      run.child.kill("SIGTERM");
      expect(await run.exited, run.stderr()).toBe(143);
      expect(run.stderr()).toMatch(/cordon: SIGTERM( again, stopped at once)?: stopped the run of/);
      expect(run.stderr()).not.toMatch(internalText);
      expect(await has(/\.lock$/)).toBe(false);
    } finally {
      run.child.kill("SIGKILL");
    }
  });

  it("a process made to exit while it holds a session lock and waits for another leaves neither file", async () => {
    const module = path.join(path.dirname(builtCli), "..", "runner", "session", "session-lock.js");
    const program = `
      const { acquireSessionLock } = await import(${JSON.stringify(module)});
      const options = { stateDir: process.argv[1], sessionKey: "agent:main:exit", pollMs: 20 };
      await acquireSessionLock({ ...options, runId: "held" });
      void acquireSessionLock({ ...options, runId: "waiting", onWait: () => {
        setTimeout(() => process.exit(143), 100);
      } });
    `;
    const state = path.join(root, "exit-state");
    const child = spawn(process.execPath, ["--input-type=module", "-e", program, state], {
      stdio: "pipe",
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const code = await new Promise((resolve) => child.on("exit", resolve));
    expect(code, stderr).toBe(143);
    const left = await readdir(path.join(state, "sessions"), { recursive: true });
    expect(left.filter((name) => name.includes(".lock"))).toEqual([]);
  });

  it("a command without a graceful stop ends at once with 143 and one line", async () => {
    const holder = startRun("followed");
    await expect.poll(() => holder.stderr(), { timeout: 60_000 }).toContain("→ exec");
    const child = spawn(process.execPath, [builtCli, "logs", "-f", "--session", "followed"], {
      cwd: project,
      env: env(),
      stdio: "pipe",
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.stdout.resume();
    const exited = new Promise<number | null>((resolve) =>
      child.on("exit", (code, signal) => resolve(code ?? (signal as unknown as number))),
    );
    await new Promise((resolve) => setTimeout(resolve, 1500));
    child.kill("SIGTERM");
    expect(await exited).toBe(143);
    expect(stderr).toBe("cordon: SIGTERM: stopped `cordon logs`\n");
    holder.child.kill("SIGINT");
    expect(await holder.exited).toBe(130);
  });
});
