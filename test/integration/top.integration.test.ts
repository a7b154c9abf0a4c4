/**
 * `cordon top` against the real engine: a running sandbox with a disk budget shows its CPU and
 * memory from the engine's stats and its disk from the loop-mounted image's filesystem (statfs of
 * the mount point: no host program walks the agent's copy), in JSON and as a plain snapshot.
 */
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createSandbox, type CordonSandbox } from "../../src/index.js";
import { diskBudgetSupport } from "../../src/sandbox/index.js";
import type { TopSnapshot } from "../../src/cli/commands/top.js";
import { demoRepo } from "../support/demo-repo.js";
import { removeContainersOfHome, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { cordonOnTerminal } from "../support/spawn-cordon.js";
import { removeStateDirectory } from "../support/state-directory.js";

describe("cordon top", () => {
  let root: string;
  let home: string;
  let box: CordonSandbox;

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-top-"));
    home = path.join(root, "home");
    const config = path.join(root, "cordon.json5");
    await writeFile(config, `{ agents: { defaults: { sandbox: { disk: "64m" } } } }\n`);
    const repo = await demoRepo();
    box = await createSandbox({
      cwd: repo,
      workspace: repo,
      configPath: config,
      env: { ...process.env, CORDON_HOME: home, CORDON_CONFIG: "", ANTHROPIC_API_KEY: "" },
      sessionKey: `top-${process.pid}-${Date.now().toString(36)}`,
    });
    const wrote = await box.sandbox.exec("head -c 8388608 /dev/urandom > big.bin && sync");
    expect(wrote.exitCode).toBe(0);
  }, 120_000);

  afterAll(async () => {
    await box?.release();
    await removeContainersOfHome(home);
    await removeStateDirectory(home);
  });

  it("shows an idle sandbox's CPU, memory and disk budget use, as JSON and as a plain snapshot", async () => {
    const name = box.plan.sandbox.spec?.containerName ?? "";
    const json = await runCordon(["top", "--json", "-n", "1"], { CORDON_HOME: home });
    expect(json.exitCode, json.stderr).toBe(0);
    const snapshot = JSON.parse(json.stdout) as TopSnapshot;
    const row = snapshot.rows.find((candidate) => candidate.sandbox === name);
    expect(row, json.stdout).toBeDefined();
    expect(row?.state).toBe("idle");
    expect(row?.usage?.memoryBytes).toBeGreaterThan(0);
    expect(row?.usage?.memoryLimitBytes).toBeGreaterThan(row?.usage?.memoryBytes ?? 0);
    expect(row?.usage?.cpuPercent).toBeGreaterThanOrEqual(0);

    const enforced = (await diskBudgetSupport()).enforced;
    if (enforced) {
      // The 8 MiB file is in the image's filesystem, whose size is the 64 MiB budget (less ext4's own).
      expect(row?.usage?.disk?.usedBytes).toBeGreaterThanOrEqual(8 * 1024 * 1024);
      expect(row?.usage?.disk?.sizeBytes).toBeLessThanOrEqual(64 * 1024 * 1024);
      expect(row?.usage?.disk?.sizeBytes).toBeGreaterThan(32 * 1024 * 1024);
    } else {
      expect(row?.usage?.disk).toBeUndefined();
    }

    // Into a pipe: two plain snapshots, no cursor codes.
    const text = await runCordon(["top", "-n", "2", "--interval", "0.2"], { CORDON_HOME: home });
    expect(text.exitCode, text.stderr).toBe(0);
    expect(text.stdout).not.toContain("\u001b[");
    expect(text.stdout.match(/^cordon top {2}\d\d:\d\d:\d\d {2}/gm)).toHaveLength(2);
    const line = text.stdout.split("\n").find((candidate) => candidate.includes(name)) ?? "";
    expect(line).toMatch(/ idle +/);
    expect(line).toMatch(/ \d+\.\d% +[\d.]+[KMG]\/[\d.]+[KMG] /);
    if (enforced) expect(line).toMatch(/ (8|9|\d\d)(\.\d)?M\/\d+M /);
  }, 120_000);

  it("a sandbox no run holds, with a command of `cordon exec` or the library running in it, is busy, and says what runs", async () => {
    const name = box.plan.sandbox.spec?.containerName ?? "";
    const stop = new AbortController();
    const running = box.sandbox.exec("sleep 600", { signal: stop.signal }).catch(() => undefined);
    try {
      let row: TopSnapshot["rows"][number] | undefined;
      for (let attempt = 0; attempt < 50 && row?.state !== "busy"; attempt += 1) {
        const json = await runCordon(["top", "--json", "-n", "1"], { CORDON_HOME: home });
        expect(json.exitCode, json.stderr).toBe(0);
        row = (JSON.parse(json.stdout) as TopSnapshot).rows.find((r) => r.sandbox === name);
      }
      expect(row?.state).toBe("busy");
      expect(row?.commands?.some((command) => command.includes("sleep 600"))).toBe(true);
      const text = await runCordon(["top", "-n", "1"], { CORDON_HOME: home });
      expect(text.stdout).toMatch(/sandboxes without a run: 1 busy, 0 idle/);
      expect(text.stdout.split("\n").find((line) => line.includes(name))).toMatch(
        / busy .*exec: .*sleep 600/,
      );
    } finally {
      stop.abort();
      await running;
    }
  }, 120_000);

  it("on a terminal, `ps --watch` redraws the view in place until q, and gives the terminal back as it was", async () => {
    // 80 columns: the sandbox's long name is the column dropped; its session shows.
    const session = box.plan.sandbox.spec?.sessionKey ?? "";
    // A redraw erases the last frame's lines (ESC[2K) before drawing the next one.
    const result = await cordonOnTerminal(
      [{ expect: session }, { expect: "q quits" }, { expect: "\u001b[2K" }, { send: "q" }],
      ["ps", "--watch", "--interval", "0.3"],
      { env: { PATH: process.env["PATH"], HOME: process.env["HOME"], CORDON_HOME: home } },
    );
    expect(result.exitCode, result.output).toBe(0);
    expect(result.output.split(session).length).toBeGreaterThan(2);
    expect(result.canonical && result.echo).toBe(true);
  }, 120_000);

  it("refuses a bad interval with the fix (exit 2)", async () => {
    const bad = await runCordon(["top", "--interval", "soon"], { CORDON_HOME: home });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toMatch(/--interval soon is not a positive number/);
  });
});
