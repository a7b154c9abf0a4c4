/**
 * The library closes what it opens: a program that runs an agent with `await using` leaves no
 * container running, `onClose: "remove"` leaves none at all, and `rm: true` removes a run's
 * sandbox as `cordon run --rm` does. Against the real engine, with a scripted model.
 */
import { mkdtemp, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { ScriptedModelClient, createRunner, type RunnerOptions } from "../../src/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, removeContainersOfHome, requireSandboxImage } from "../support/docker.js";
import { removeStateDirectory } from "../support/state-directory.js";

const sessionOf = (name: string): string =>
  `close-${name}-${process.pid}-${Date.now().toString(36)}`;

/** `running`, `exited`, … or `absent`. */
async function containerState(name: string): Promise<string> {
  return dockerClient()
    .getContainer(name)
    .inspect()
    .then(
      (info) => info.State.Status,
      () => "absent",
    );
}

/** One exec in the sandbox, then an answer. */
const model = () =>
  new ScriptedModelClient({
    version: 1,
    turns: [
      { content: [{ type: "tool_use", name: "exec", input: { command: "echo hi > note.txt" } }] },
      { content: [{ type: "text", text: "wrote note.txt" }] },
    ],
  });

describe("a runner closes what its runs opened", () => {
  let home: string;
  let repo: string;
  const options = (extra: Partial<RunnerOptions> = {}): RunnerOptions => ({
    cwd: repo,
    workspace: repo,
    env: { ...process.env, CORDON_HOME: home, CORDON_CONFIG: "", ANTHROPIC_API_KEY: "" },
    model: model(),
    ...extra,
  });

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-close-home-"));
    repo = await demoRepo();
  });

  afterAll(async () => {
    await removeContainersOfHome(home);
    await removeStateDirectory(home);
  });

  it("`await using` stops the run's sandbox and keeps its copy; a closed runner runs nothing more", async () => {
    const sessionKey = sessionOf("stop");
    let container: string;
    let closed: ReturnType<typeof createRunner> | undefined;
    {
      await using runner = createRunner(options());
      closed = runner;
      const result = await runner.run({ prompt: "write a note", sessionKey });
      expect(result.exitCode, JSON.stringify(result)).toBe(0);
      container = (await runner.plan({ sessionKey })).sandbox.spec?.containerName ?? "";
      expect(await containerState(container)).toBe("running");
    }
    // Stopped, not removed: the private copy and the work in it stay for `cordon diff`.
    expect(await containerState(container)).toBe("exited");
    expect(await closed.close()).toEqual([{ sandbox: container, outcome: "stopped" }]);
    const after = await closed.run({ prompt: "again", sessionKey });
    expect(after.status).toBe("sandbox_error");
    expect(after.message).toMatch(/this runner is closed/);

    // The next runner starts the same sandbox again, the note still there.
    await using next = createRunner(options());
    const held = await next.acquireSandbox({ sessionKey });
    const read = await held.lease.sandbox.exec("cat note.txt");
    await held.lease.release();
    expect(read.stdout).toBe("hi\n");
  }, 120_000);

  it("close() leaves a sandbox running while another process's command runs in it, and says why", async () => {
    const sessionKey = sessionOf("busy");
    const runner = createRunner(options());
    const result = await runner.run({ prompt: "write a note", sessionKey });
    expect(result.exitCode, JSON.stringify(result)).toBe(0);
    const container = (await runner.plan({ sessionKey })).sandbox.spec?.containerName ?? "";
    // Another terminal's shell in the sandbox, started outside this runner (as `docker exec`).
    const shell = await dockerClient()
      .getContainer(container)
      .exec({ Cmd: ["sleep", "600"], User: "1000" });
    await shell.start({ Detach: true });
    expect(await runner.close()).toEqual([
      { sandbox: container, outcome: "kept", reason: "commands run in it (sleep 600)" },
    ]);
    expect(await containerState(container)).toBe("running");
    await dockerClient().getContainer(container).stop({ t: 0 });
  }, 120_000);

  it('`onClose: "remove"` leaves neither container nor copy; `rm: true` removes a run\'s at once', async () => {
    const sessionKey = sessionOf("remove");
    const runner = createRunner(options({ onClose: "remove" }));
    expect((await runner.run({ prompt: "write a note", sessionKey })).exitCode).toBe(0);
    const plan = await runner.plan({ sessionKey });
    const container = plan.sandbox.spec?.containerName ?? "";
    const copy = plan.sandbox.spec?.privateWorkspace ?? "";
    expect(await containerState(container)).toBe("running");
    expect(await runner.close()).toEqual([{ sandbox: container, outcome: "removed" }]);
    expect(await containerState(container)).toBe("absent");
    await expect(stat(copy)).rejects.toThrow(/ENOENT/);

    const rmSession = sessionOf("rm");
    await using once = createRunner(options({ onClose: "keep" }));
    const result = await once.run({ prompt: "write a note", sessionKey: rmSession, rm: true });
    expect(result.exitCode).toBe(0);
    const rmContainer = (await once.plan({ sessionKey: rmSession })).sandbox.spec?.containerName;
    expect(await containerState(rmContainer ?? "")).toBe("absent");
  }, 120_000);
});
