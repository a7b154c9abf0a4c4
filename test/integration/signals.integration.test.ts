/**
 * SIGTERM and SIGINT end a command cleanly, through the built CLI as a user or CI runs it: exit
 * 143 / 130, one line saying what was stopped and what is left, no internal error text, and no
 * wait file or session lock left behind; a second signal forces.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { git } from "../support/demo-repo.js";
import { requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { builtCli } from "../support/spawn-cordon.js";
import { removeStateDirectory } from "../support/state-directory.js";

const sandboxUid = process.getuid?.() === 0 ? 1000 : (process.getuid?.() ?? 1000);

interface Started {
  child: ChildProcessWithoutNullStreams;
  stderr: () => string;
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

  /** `cordon run` on session `s` whose one tool call sleeps, as a child process. */
  function startRun(session: string): Started {
    const child = spawn(
      process.execPath,
      [builtCli, "run", "--model-script", script, "--session", session, "go"],
      { cwd: project, env: env(), stdio: "pipe" },
    );
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.stdout.resume();
    child.stdin.end();
    const exited = new Promise<number | null>((resolve) =>
      child.on("exit", (code, signal) => resolve(code ?? (signal as unknown as number))),
    );
    return { child, stderr: () => stderr, exited };
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
