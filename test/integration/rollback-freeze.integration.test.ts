/**
 * A rollback and a run of another session on one sandbox (scope `agent`), against the real engine
 * and the built CLI: the rollback (a child process) is stopped with SIGSTOP while it holds the
 * sandbox frozen, so the race is held open for as long as the test needs. The other session's
 * acquire must wait for it rather than resume the sandbox under the rollback's writes (which the
 * rollback would catch and refuse as torn, leaving the copy half restored), and a rollback
 * killed inside its freeze must not keep the sandbox paused for good.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { packageRoot, sleep } from "../../src/common/index.js";
import { createRunner, type Runner } from "../../src/index.js";
import {
  freezeMarkerFile,
  holdFreezeMarker,
  readFreezeMarker,
} from "../../src/sandbox/docker/freeze-marker.js";
import type { SandboxLease } from "../../src/sandbox/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, removeContainersOfHome, requireSandboxImage } from "../support/docker.js";
import { removeStateDirectory } from "../support/state-directory.js";

const cli = path.join(packageRoot(), "dist", "cli", "main.js");
const suffix = `${process.pid}-${Date.now().toString(36)}`;
/** Attempts at catching a rollback inside its freeze (each takes one under a second unloaded). */
const attempts = 6;

interface Rollback {
  child: ChildProcess;
  exited: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

describe("a rollback and another session's run on one sandbox", () => {
  let home: string;
  let repo: string;
  let env: NodeJS.ProcessEnv;
  let runner: Runner;
  const docker = dockerClient();

  const paused = async (container: string): Promise<boolean> =>
    (await docker.getContainer(container).inspect()).State.Paused;

  /** Runs `command` in the session's sandbox, as the agent would. */
  const inSandbox = async (sessionKey: string, command: string) => {
    const held = await runner.acquireSandbox({ sessionKey });
    try {
      const result = await held.lease.sandbox.exec(command);
      expect(result.exitCode, result.stderr).toBe(0);
      return { stdout: result.stdout, container: held.plan.sandbox.spec?.containerName ?? "" };
    } finally {
      await held.lease.release();
    }
  };

  /** What the checkpoint `kept` holds, and what the breaking turn changes. */
  const keptState = "pricing.py\n644\nkept\n";
  const state = "ls pricing.py 2>/dev/null; stat -c %a test_pricing.py; cat kept.txt";
  const breakCopy = (sessionKey: string) =>
    inSandbox(
      sessionKey,
      "rm -f pricing.py && echo broken > kept.txt && chmod 755 test_pricing.py && for i in $(seq 1 200); do echo $i > made-$i.txt; done",
    );

  const startRollback = (sessionKey: string, checkpoint: string): Rollback => {
    const child = spawn(
      process.execPath,
      [cli, "rollback", checkpoint, "--session", sessionKey, "--workspace", repo, "--json"],
      { env: { ...env, CORDON_LOG_LEVEL: "silent" }, stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
      child.on("exit", (code) => resolve({ code, stdout, stderr })),
    );
    return { child, exited };
  };

  /**
   * Stops the rollback (SIGSTOP) once it holds `container` frozen: its marker names it and the
   * engine has the container paused, looked at again after the stop. False when the rollback got
   * out of its freeze first (or ended).
   */
  const stopInsideFreeze = async (rollback: Rollback, container: string): Promise<boolean> => {
    let ended = false;
    void rollback.exited.then(() => (ended = true));
    const pid = rollback.child.pid ?? -1;
    const holds = async () =>
      (await readFreezeMarker(home, container))?.pid === pid && (await paused(container));
    while (!ended) {
      if (await holds()) {
        process.kill(pid, "SIGSTOP");
        if (await holds()) return true;
        process.kill(pid, "SIGCONT");
      }
      await sleep(5);
    }
    return false;
  };

  /**
   * Holds `container`'s freeze marker from this process, as another cordon command would (a
   * live holder), until `release`.
   */
  const holdFrozen = async (container: string) => {
    let resume!: () => void;
    const gate = new Promise<void>((resolve) => (resume = resolve));
    let held = false;
    const holding = holdFreezeMarker(home, container, async () => {
      held = true;
      await gate;
    });
    while (!held) await sleep(10);
    return {
      release: async () => {
        resume();
        await holding;
      },
    };
  };

  /** The line a command prints while it waits for `holdFrozen`'s freeze. */
  const waitLine = (container: string) =>
    new RegExp(`· waiting for .*\\(pid ${process.pid} on .*\\), which has ${container} frozen`);

  /** The built CLI, logs silent: what the user sees of a wait is the command's own output. */
  const cordon = (...args: string[]) => {
    const child = spawn(process.execPath, [cli, ...args], {
      cwd: repo,
      env: { ...env, CORDON_LOG_LEVEL: "silent" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const output = { stdout: "", stderr: "" };
    child.stdout.on("data", (chunk: Buffer) => (output.stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output.stderr += chunk.toString()));
    const code = new Promise<number | null>((resolve) => child.on("exit", resolve));
    return { child, output, code };
  };

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-rollback-freeze-home-"));
    repo = await demoRepo();
    env = {
      ...process.env,
      CORDON_HOME: home,
      CORDON_CONFIG: "",
      ANTHROPIC_API_KEY: "",
      // Every session of the agent shares one sandbox, and so one copy.
      CORDON_SANDBOX_SCOPE: "agent",
    };
    runner = createRunner({ cwd: repo, workspace: repo, env, onClose: "keep" });
  });

  afterAll(async () => {
    await runner?.close();
    await removeContainersOfHome(home);
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("another session's acquire during the rollback waits for it, and the copy comes back whole", async () => {
    const owner = `freeze-owner-${suffix}`;
    const other = `freeze-other-${suffix}`;
    const { container } = await inSandbox(owner, "echo kept > kept.txt");
    await runner.checkpoint({ sessionKey: owner, name: "kept" });
    expect((await inSandbox(owner, state)).stdout).toBe(keptState);

    let caught = false;
    for (let attempt = 0; attempt < attempts && !caught; attempt += 1) {
      await breakCopy(owner);
      const rollback = startRollback(owner, "kept");
      if (!(await stopInsideFreeze(rollback, container))) {
        const done = await rollback.exited;
        expect(done.code, done.stderr).toBe(0);
        continue;
      }
      // The other session's run acquires the sandbox while the rollback holds it frozen.
      const waits: string[] = [];
      let lease: SandboxLease | undefined;
      const acquiring = runner
        .acquireSandbox({
          sessionKey: other,
          onProgress: (progress) => {
            if (progress.phase === "wait") waits.push(progress.message);
          },
        })
        .then((held) => (lease = held.lease));
      while (waits.length === 0 && lease === undefined) await sleep(10);
      if (lease !== undefined) {
        // The rollback had resumed the sandbox before it stopped: no race was held open.
        await lease.release();
        process.kill(rollback.child.pid ?? -1, "SIGCONT");
        const done = await rollback.exited;
        // Without the freeze marker this is where a race shows: the acquire resumed the
        // sandbox under the rollback, which refuses what it wrote as torn (exit 3).
        expect(done.code, done.stderr).toBe(0);
        continue;
      }
      caught = true;
      expect(waits[0]).toMatch(
        new RegExp(
          `^waiting for .*\\(pid ${rollback.child.pid} on .*\\), which has ${container} frozen`,
        ),
      );
      // Still frozen for the rollback, which is still inside its freeze.
      expect(await paused(container)).toBe(true);
      expect((await readFreezeMarker(home, container))?.pid).toBe(rollback.child.pid);
      expect(lease).toBeUndefined();

      process.kill(rollback.child.pid ?? -1, "SIGCONT");
      const done = await rollback.exited;
      // A rollback whose sandbox was resumed under it fails ("was resumed while cordon read its
      // workspace"): this one saw it paused from start to end.
      expect(done.code, done.stderr).toBe(0);
      expect(JSON.parse(done.stdout)).toMatchObject({ restored: { name: "kept" } });
      await acquiring;
      try {
        const now = await lease!.sandbox.exec(`${state}; ls made-* 2>/dev/null | wc -l`);
        expect(now.stdout).toBe(`${keptState}0\n`);
      } finally {
        await lease!.release();
      }
      expect(await paused(container)).toBe(false);
      expect(await readFreezeMarker(home, container)).toBeUndefined();
    }
    expect(caught, `no rollback was caught inside its freeze in ${attempts} attempts`).toBe(true);
  });

  it("a checkpoint waiting behind another command's freeze says so on stderr, then records", async () => {
    const session = `freeze-said-${suffix}`;
    const { container } = await inSandbox(session, "echo said > said.txt");
    const other = await holdFrozen(container);
    const checkpoint = cordon(
      "checkpoint",
      "said",
      ...["--session", session, "--workspace", repo, "--json"],
    );
    try {
      await expect
        .poll(() => checkpoint.output.stderr, { timeout: 60_000, interval: 50 })
        .toMatch(waitLine(container));
      expect(checkpoint.output.stdout).toBe("");
    } finally {
      await other.release();
    }
    expect(await checkpoint.code, checkpoint.output.stderr).toBe(0);
    expect(JSON.parse(checkpoint.output.stdout)).toMatchObject({ name: "said" });
  });

  it("a rollback killed inside its freeze leaves a stale marker: the next acquire resumes the sandbox at once", async () => {
    const owner = `stale-owner-${suffix}`;
    const other = `stale-other-${suffix}`;
    const { container } = await inSandbox(owner, "echo kept > kept.txt");
    // The copy is the first test's too (one sandbox per agent): a checkpoint of its own.
    await runner.checkpoint({ sessionKey: owner, name: "kept-again" });

    let caught = false;
    for (let attempt = 0; attempt < attempts && !caught; attempt += 1) {
      await breakCopy(owner);
      const rollback = startRollback(owner, "kept-again");
      if (!(await stopInsideFreeze(rollback, container))) {
        const done = await rollback.exited;
        expect(done.code, done.stderr).toBe(0);
        continue;
      }
      rollback.child.kill("SIGKILL");
      await rollback.exited;
      // Its unpause may have been on its way when it stopped.
      if (!(await paused(container))) continue;
      caught = true;
      expect((await readFreezeMarker(home, container))?.pid).toBe(rollback.child.pid);

      const waits: string[] = [];
      const held = await runner.acquireSandbox({
        sessionKey: other,
        onProgress: (progress) => {
          if (progress.phase === "wait") waits.push(progress.message);
        },
      });
      try {
        expect(waits).toEqual([]);
        expect(await paused(container)).toBe(false);
        expect(await readFreezeMarker(home, container)).toBeUndefined();
        expect((await held.lease.sandbox.exec("echo alive")).stdout).toBe("alive\n");
      } finally {
        await held.lease.release();
      }
    }
    expect(caught, `no rollback was caught inside its freeze in ${attempts} attempts`).toBe(true);
  });
  it("sandbox rm waits for a live freeze and takes the marker with the sandbox; a dead holder's goes at once, and prune sweeps one whose sandbox is gone", async () => {
    const session = `freeze-rm-${suffix}`;
    const { container } = await inSandbox(session, "true");
    const exists = async (name: string) =>
      (await docker.listContainers({ all: true, filters: { name: [`^/${name}$`] } })).length > 0;
    /** A marker as a command killed inside its freeze leaves it. */
    const leaveDeadMarker = async (name: string) => {
      const gone = spawnSync(process.execPath, ["-e", ""]).pid ?? 999_999;
      const file = freezeMarkerFile(home, name);
      await mkdir(path.dirname(file), { recursive: true });
      const holder = { v: 1, pid: gone, host: hostname(), startTicks: 1, token: "dead" };
      await writeFile(file, JSON.stringify({ ...holder, command: "cordon rollback", since: "x" }));
      return file;
    };

    // A live command holds it frozen: rm waits, says so, and removes nothing until it is done.
    const other = await holdFrozen(container);
    const removal = cordon("sandbox", "rm", container, "--discard-changes");
    try {
      await expect
        .poll(() => removal.output.stderr, { timeout: 60_000, interval: 50 })
        .toMatch(waitLine(container));
      expect(await exists(container)).toBe(true);
    } finally {
      await other.release();
    }
    expect(await removal.code, removal.output.stderr).toBe(0);
    expect(await exists(container)).toBe(false);
    const records = path.dirname(freezeMarkerFile(home, container));
    expect((await readdir(records)).filter((name) => name.includes(".frozen"))).toEqual([]);

    // A dead holder's marker (the sandbox paused under it or not) goes with the sandbox.
    await inSandbox(session, "true");
    await leaveDeadMarker(container);
    const again = cordon("sandbox", "rm", container, "--discard-changes");
    expect(await again.code, again.output.stderr).toBe(0);
    expect(again.output.stderr).not.toMatch(/waiting for/);
    expect((await readdir(records)).filter((name) => name.includes(".frozen"))).toEqual([]);

    // One left beside no sandbox at all (by a cordon older than this) is swept by prune.
    const leftover = await leaveDeadMarker(`cordon-gone-${suffix}`);
    const prune = cordon("sandbox", "prune", "--json");
    expect(await prune.code, prune.output.stderr).toBe(0);
    const report = JSON.parse(prune.output.stdout) as { orphans: { path: string }[] };
    expect(report.orphans.map((orphan) => orphan.path)).toContain(leftover);
    expect((await readdir(records)).filter((name) => name.includes(".frozen"))).toEqual([]);
  });

  it("Ctrl-C while sandbox rm waits for a live freeze stops the wait: nothing removed, the other command's marker left", async () => {
    const session = `freeze-rm-stop-${suffix}`;
    const { container } = await inSandbox(session, "true");
    const exists = async (name: string) =>
      (await docker.listContainers({ all: true, filters: { name: [`^/${name}$`] } })).length > 0;
    const other = await holdFrozen(container);
    const marker = await readFreezeMarker(home, container);
    try {
      const removal = cordon("sandbox", "rm", container, "--discard-changes");
      await expect
        .poll(() => removal.output.stderr, { timeout: 60_000, interval: 50 })
        .toMatch(waitLine(container));
      removal.child.kill("SIGINT");
      expect(await removal.code, removal.output.stderr).toBe(130);
      expect(removal.output.stderr).toContain(
        `cordon: SIGINT: stopped waiting for the command that has ${container} frozen; ${container} is as it was\n`,
      );
      expect(removal.output.stdout).toBe("");
      expect(await exists(container)).toBe(true);
      expect(await readFreezeMarker(home, container)).toEqual(marker);
    } finally {
      await other.release();
    }
    // Once the other command is done, the same removal goes through.
    const again = cordon("sandbox", "rm", container, "--discard-changes");
    expect(await again.code, again.output.stderr).toBe(0);
    expect(await exists(container)).toBe(false);
  });
});
