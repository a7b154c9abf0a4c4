/**
 * Sandboxes over time, with the built CLI and real containers: an idle sandbox is stopped (not
 * removed) by the next cordon invocation and started again, files intact, by the next acquire;
 * one a live run holds (between two model turns, nothing running in it) is left running;
 * `cordon sandbox list` shows drift, and why, after a config change and after an image rebuild.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable } from "node:stream";

import { pack } from "tar-stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createRunner } from "../../src/runner/index.js";
import type { SandboxSummary } from "../../src/sandbox/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { startMessagesApiServer } from "../support/messages-api-server.js";
import { builtCli, runBuiltCordon } from "../support/spawn-cordon.js";
import { removeStateDirectory } from "../support/state-directory.js";

const suffix = `${process.pid}-${Date.now().toString(36)}`;
const docker = dockerClient();

type Listed = SandboxSummary & { drift: { drifted: boolean | null; reasons: string[] } };

describe("idle sandboxes and drift", () => {
  let home: string;
  const repos: string[] = [];
  const images: string[] = [];
  let builtin: string;
  const image = `cordon-drift-test:${suffix}`;

  const env = (): NodeJS.ProcessEnv => ({
    PATH: process.env["PATH"],
    HOME: process.env["HOME"],
    CORDON_HOME: home,
    CORDON_LOG_LEVEL: "silent",
    CORDON_SANDBOX_IMAGE: image,
  });
  const cordon = (repo: string, ...args: string[]) =>
    runBuiltCordon(args, { env: env(), cwd: repo });

  async function listed(repo: string): Promise<Map<string, Listed>> {
    const result = await cordon(repo, "sandbox", "list", "--json");
    expect(result.code, result.stderr).toBe(0);
    const sandboxes = (JSON.parse(result.stdout.toString()) as { sandboxes: Listed[] }).sandboxes;
    return new Map(sandboxes.map((s) => [s.name, s]));
  }

  async function containerOf(repo: string, sessionKey: string): Promise<string> {
    const plan = await createRunner({ env: env(), cwd: repo, workspace: repo }).plan({
      sessionKey,
    });
    const name = plan.sandbox.spec?.containerName;
    if (!name) throw new Error("the plan has no container");
    return name;
  }

  const stateOf = async (name: string) => (await docker.getContainer(name).inspect()).State.Status;

  /** Tags `tag` as a fresh build of the built-in image (one LABEL layer, no network). */
  async function buildImage(tag: string, generation: number): Promise<void> {
    const context = pack();
    context.entry(
      { name: "Dockerfile" },
      `FROM ${builtin}\nLABEL cordon.test.generation="${generation}"\n`,
    );
    context.finalize();
    const stream = await docker.buildImage(Readable.from(context), { t: tag, rm: true });
    await new Promise<void>((resolve, reject) =>
      docker.modem.followProgress(stream, (error: Error | null) =>
        error ? reject(error) : resolve(),
      ),
    );
    images.push((await docker.getImage(tag).inspect()).Id);
  }

  beforeAll(async () => {
    builtin = await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-lifecycle-"));
    await buildImage(image, 1);
  });
  afterAll(async () => {
    const mine = await docker.listContainers({
      all: true,
      filters: { label: [`cordon.home=${home}`] },
    });
    for (const info of mine) {
      await docker
        .getContainer(info.Id)
        .remove({ force: true })
        .catch(() => undefined);
    }
    for (const id of images) {
      await docker
        .getImage(id)
        .remove({ force: true })
        .catch(() => undefined);
    }
    await removeStateDirectory(home);
    for (const repo of repos) await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("stops an idle sandbox at the next invocation, never one a live run holds, and the next acquire starts it with its files", async () => {
    const repo = await demoRepo();
    repos.push(repo);
    // About a second: long enough for the acquires below, short enough to wait out.
    await writeFile(
      path.join(repo, "cordon.json5"),
      "{ agents: { defaults: { sandbox: { prune: { stopIdleMinutes: 0.02 } } } } }\n",
    );
    const idle = `idle-${suffix}`;
    const held = `held-${suffix}`;
    // With an egress proxy, which holds memory too.
    const made = await cordon(
      repo,
      "exec",
      "--session",
      idle,
      "--allow-host",
      "example.com",
      "--",
      "echo kept > kept.txt",
    );
    expect(made.code, made.stderr).toBe(0);

    // A live run between turns: its tool call has ended, it waits for the model (a server that
    // answers the second call with a stream that never ends).
    const server = await startMessagesApiServer();
    server.enqueue(
      {
        kind: "message",
        content: [
          { type: "tool_use", id: "toolu_held", name: "exec", input: { command: "echo held" } },
        ],
      },
      { kind: "hang" },
    );
    // Both processes that may stop the idle sandbox log at the default level, as a user runs
    // them: the stop is no line on their stderr (it was a JSON info line).
    const { CORDON_LOG_LEVEL: _silent, ...defaultLevel } = env();
    const run: ChildProcess = spawn(
      process.execPath,
      [builtCli, "run", "--session", held, "--output-format", "stream-json", "hold"],
      {
        env: { ...defaultLevel, ANTHROPIC_API_KEY: "test-key", ANTHROPIC_BASE_URL: server.url },
        cwd: repo,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    const exited = new Promise<number | null>((resolve) => run.on("exit", resolve));
    let streamed = "";
    let runStderr = "";
    run.stderr?.setEncoding("utf8").on("data", (chunk: string) => (runStderr += chunk));
    await new Promise<void>((resolve, reject) => {
      run.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
        streamed += chunk;
        // The second model call has started: the sandbox is idle, the run alive.
        if (streamed.includes('"type":"model-start","turn":2')) resolve();
      });
      run.on("exit", () => reject(new Error(`the held run ended early: ${streamed}`)));
    });

    // Both records are now older than the limit.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const next = await runBuiltCordon(["exec", "--session", `other-${suffix}`, "--", "true"], {
      env: defaultLevel,
      cwd: repo,
    });
    expect(next.code, next.stderr).toBe(0);
    for (const stderr of [next.stderr.toString(), runStderr]) {
      expect(stderr).not.toMatch(/stopped idle sandboxes|"level":/);
    }

    const idleName = await containerOf(repo, idle);
    const heldName = await containerOf(repo, held);
    expect(await stateOf(idleName)).toBe("exited");
    expect(await stateOf(`${idleName}-egress`)).toBe("exited");
    expect(await stateOf(heldName)).toBe("running");
    const sandboxes = await listed(repo);
    expect(sandboxes.get(idleName)).toMatchObject({ state: "exited" });
    expect(sandboxes.get(idleName)?.idleStoppedAt).toBeDefined();

    // A manual prune keeps a resting sandbox: it is stopped on purpose, with work in it.
    const pruned = await cordon(repo, "sandbox", "prune");
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(await stateOf(idleName)).toBe("exited");

    const back = await cordon(
      repo,
      "exec",
      "--session",
      idle,
      "--allow-host",
      "example.com",
      "--",
      "cat",
      "kept.txt",
    );
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout.toString()).toBe("kept\n");
    expect(await stateOf(idleName)).toBe("running");
    expect(await stateOf(`${idleName}-egress`)).toBe("running");

    run.kill("SIGINT");
    await exited;
    await server.close();
  });

  it("sandbox list shows drift, and why, after a config change and after an image rebuild", async () => {
    const repo = await demoRepo();
    repos.push(repo);
    const session = `drift-${suffix}`;
    const made = await cordon(repo, "exec", "--session", session, "--", "true");
    expect(made.code, made.stderr).toBe(0);
    const name = await containerOf(repo, session);
    expect((await listed(repo)).get(name)?.drift).toMatchObject({ drifted: false, reasons: [] });

    // A tighter memory limit (a found cordon.json5 may tighten): another config hash.
    const config = path.join(repo, "cordon.json5");
    await writeFile(
      config,
      '{ agents: { defaults: { sandbox: { docker: { memory: "512m" } } } } }\n',
    );
    const changed = (await listed(repo)).get(name);
    expect(changed?.drift.drifted).toBe(true);
    expect(changed?.drift.reasons.join("\n")).toMatch(/^config changed \(hash \w+ → \w+\)$/);
    expect(changed?.configStatus).toBe("stale");
    const table = await cordon(repo, "sandbox", "list");
    expect(table.stdout.toString().split("\n")[0]).toContain("DRIFT");
    expect(table.stdout.toString()).toMatch(new RegExp(`${name}.*yes: config changed`));
    await rm(config);
    expect((await listed(repo)).get(name)?.drift.drifted).toBe(false);

    // The same tag, rebuilt: the container runs an image the tag no longer names.
    await buildImage(image, 2);
    const rebuilt = (await listed(repo)).get(name);
    expect(rebuilt?.drift.drifted).toBe(true);
    expect(rebuilt?.drift.reasons.join("\n")).toMatch(/^image rebuilt or changed/);

    // The next acquire agrees: it recreates the container, which is then current again.
    const again = await cordon(repo, "exec", "--session", session, "--", "true");
    expect(again.code, again.stderr).toBe(0);
    expect((await listed(repo)).get(name)?.drift).toMatchObject({ drifted: false, reasons: [] });
  });
});
