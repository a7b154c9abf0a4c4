/**
 * A running command's output, live, as a user sees it: the built CLI with a scripted model runs a
 * command in a real sandbox that prints a line a second. stream-json gets `tool-output` events
 * while it runs (one is awaited before the command may go on: a gate, not a sleep), `ps` names
 * its last line, a pipe gets plain lines and no cursor code, a terminal (a pseudo-terminal from
 * `script`) gets the line redrawn in place, and the result line shows the end of the output.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, execIn, requireSandboxImage } from "../support/docker.js";
import { removeStateDirectory } from "../support/state-directory.js";

interface Envelope {
  seq: number;
  type: string;
  [key: string]: unknown;
}

interface CliProcess {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** stdout's JSONL records so far. */
  events: () => Envelope[];
  exited: Promise<number | null>;
}

const cli = path.join(packageRoot(), "dist", "cli", "main.js");
const suffix = `${process.pid}-${Date.now().toString(36)}`;

describe("live tool output", () => {
  let home: string;
  let repo: string;
  let scripts: string;
  const containers: string[] = [];

  const env = (): NodeJS.ProcessEnv => ({
    PATH: process.env["PATH"],
    HOME: process.env["HOME"],
    CORDON_HOME: home,
    CORDON_LOG_LEVEL: "silent",
  });

  function spawnCli(command: string, args: string[]): CliProcess {
    const child = spawn(command, args, { env: env(), stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    return {
      child,
      stdout: () => stdout,
      stderr: () => stderr,
      events: () =>
        stdout
          .split("\n")
          .filter((line) => line.startsWith("{"))
          .map((line) => JSON.parse(line) as Envelope),
      exited: new Promise((resolve) => child.on("exit", (code) => resolve(code))),
    };
  }

  const cordon = (args: string[]): CliProcess => spawnCli(process.execPath, [cli, ...args]);

  let scriptCount = 0;
  /** `cordon run` args for a scripted model that runs `command` with exec, then answers. */
  async function runArgs(session: string, command: string, format: string): Promise<string[]> {
    scriptCount += 1;
    const script = path.join(scripts, `script-${scriptCount}.json`);
    const turns = [
      { content: [{ type: "tool_use", name: "exec", input: { command } }] },
      { content: [{ type: "text", text: "done" }] },
    ];
    await writeFile(script, JSON.stringify({ version: 1, turns }));
    return [
      "run",
      "--workspace",
      repo,
      "--session",
      `${session}-${suffix}`,
      "--model-script",
      script,
      "--output-format",
      format,
      "--rm",
      "run it",
    ];
  }

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-live-output-"));
    scripts = await mkdtemp(path.join(tmpdir(), "cordon-live-scripts-"));
    repo = await demoRepo();
  });
  afterAll(async () => {
    for (const name of containers) {
      await dockerClient()
        .getContainer(name)
        .remove({ force: true })
        .catch(() => undefined);
    }
    await removeStateDirectory(home);
    await rm(scripts, { recursive: true, force: true });
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("stream-json: tool-output events while the command runs, in order, before its result; ps names the last line", async () => {
    const command =
      "echo waiting; until [ -e /tmp/gate-live ]; do sleep 0.1; done; " +
      "for i in 1 2 3 4; do echo \"step $i\"; sleep 1; done; printf '\\n4 steps done\\n\\n'";
    const running = cordon(await runArgs("stream", command, "stream-json"));
    // Its first line arrives while the command waits at the gate: output is live, not replayed.
    await expect
      .poll(() => running.events().find((event) => event.type === "tool-output"), {
        timeout: 120_000,
        interval: 100,
      })
      .toMatchObject({ name: "exec", text: "waiting\n", lastLine: "waiting" });
    const container = String(
      running.events().find((e) => e.type === "sandbox-ready")?.["container"],
    );
    containers.push(container);
    expect(running.events().some((event) => event.type === "tool-result")).toBe(false);

    const ps = cordon(["ps", "--json"]);
    expect(await ps.exited).toBe(0);
    expect(JSON.parse(ps.stdout())).toContainEqual(
      expect.objectContaining({
        sessionKey: `agent:main:stream-${suffix}`,
        doing: expect.stringMatching(/^running exec echo waiting/) as unknown,
        output: "waiting",
      }),
    );

    const opened = await execIn(dockerClient().getContainer(container), [
      "touch",
      "/tmp/gate-live",
    ]);
    expect(opened.exitCode, opened.stderr).toBe(0);
    expect(await running.exited, running.stderr()).toBe(0);

    const events = running.events();
    const outputs = events.filter((event) => event.type === "tool-output");
    const result = events.find((event) => event.type === "tool-result");
    // A line a second, events at most four a second: one event per line after the first.
    expect(outputs.length).toBeGreaterThanOrEqual(4);
    expect(outputs.map((event) => event.text).join("")).toBe(
      "waiting\nstep 1\nstep 2\nstep 3\nstep 4\n\n4 steps done\n\n",
    );
    const seqs = outputs.map((event) => event.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(Math.max(...seqs)).toBeLessThan(Number(result?.seq));
    expect(outputs.at(-1)).toMatchObject({ lastLine: "4 steps done", omittedChars: 0 });

    // The session's events file keeps them, so `logs` replays them; its result line is the tail.
    const logs = cordon(["logs", "--workspace", repo, "--session", `stream-${suffix}`]);
    expect(await logs.exited).toBe(0);
    expect(logs.stdout()).toContain("  exit 0: 4 steps done\n");
    const json = cordon(["logs", "--json", "--workspace", repo, "--session", `stream-${suffix}`]);
    expect(await json.exited).toBe(0);
    expect(json.stdout().match(/"type":"tool-output"/g)?.length).toBe(outputs.length);
  });

  it("text into a pipe: plain lines now and then, no cursor code; the result line is the tail", async () => {
    const command =
      "for i in 1 2 3 4 5 6 7; do echo \"step $i\"; sleep 1; done; printf '\\n7 steps done\\n\\n'";
    const running = cordon(await runArgs("pipe", command, "text"));
    expect(await running.exited, running.stderr()).toBe(0);
    const stderr = running.stderr();
    expect(stderr).toContain("→ exec for i in");
    // The command ran past the 5 s between plain lines: at least one names a step.
    expect(stderr).toMatch(/\n {2}│ step \d\n/);
    expect(stderr).toContain("\n  exit 0: 7 steps done\n");
    expect(stderr).not.toContain("\u001b");
    expect(stderr).not.toContain("\r");
  });

  it("text on a terminal: the running command's last line is redrawn in place, then erased", async () => {
    const command =
      "for i in 1 2 3; do echo \"step $i\"; sleep 1; done; printf '\\n3 steps done\\n\\n'";
    const args = [cli, ...(await runArgs("tty", command, "text"))];
    const quoted = [process.execPath, ...args].map((arg) => `'${arg.replaceAll("'", "'\\''")}'`);
    // script(1) gives the CLI a pseudo-terminal for stdout and stderr, as a person's shell does.
    const running = spawnCli("script", ["-qefc", quoted.join(" "), "/dev/null"]);
    expect(await running.exited, running.stdout()).toBe(0);
    const screen = running.stdout();
    /* eslint-disable no-control-regex -- the erase-line code is what is looked for */
    expect(screen).toMatch(/\r\u001b\[2K {2}│ step 1/);
    expect(screen).toMatch(/\r\u001b\[2K {2}│ step 3/);
    // Erased before the result line, which shows the end of the output.
    expect(screen).toMatch(/\r\u001b\[2K {2}exit 0: 3 steps done\r?\n/);
    /* eslint-enable no-control-regex */
  });
});
