/**
 * A container killed mid-session: the command it was running fails with a clear error, and the
 * next call of the same run gets a fresh container with the same private workspace.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createRunner, type Runner } from "../../src/runner/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { removeStateDirectory } from "../support/state-directory.js";

describe("a sandbox whose container dies mid-session", () => {
  let home: string;
  let repo: string;
  let runner: Runner;
  const sessionKey = `recovery-${process.pid}-${Date.now().toString(36)}`;

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-recovery-"));
    repo = await demoRepo();
    runner = createRunner({ env: { CORDON_HOME: home }, workspace: repo });
  });
  afterAll(async () => {
    await runner.discardSandbox({ sessionKey }).catch(() => undefined);
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("fails the interrupted command clearly, then runs the next one in a fresh container", async () => {
    const { lease } = await runner.acquireSandbox({ sessionKey });
    try {
      const sandbox = lease.sandbox;
      await sandbox.files.writeFile("notes.txt", "kept\n");
      const before = (await sandbox.exec("hostname")).stdout.trim();

      const running = sandbox.exec("sleep 30");
      await new Promise((resolve) => setTimeout(resolve, 500));
      await dockerClient().getContainer(sandbox.id).kill();
      const interrupted = await running.then(
        (result) => result,
        (error: unknown) => error,
      );
      // Either a clear error, or a result that says the command was killed: never a success.
      if (interrupted instanceof Error)
        expect(interrupted.message).toMatch(/gone|not running|sandbox/i);
      else expect((interrupted as { exitCode: number | null }).exitCode).not.toBe(0);

      const after = await sandbox.exec("hostname; cat notes.txt");
      expect(after.exitCode).toBe(0);
      expect(after.stdout).toContain("kept");
      // A new container (a new hostname), the same name and private workspace.
      expect(after.stdout.split("\n")[0]).not.toBe(before);
      const info = await dockerClient().getContainer(sandbox.id).inspect();
      expect(info.State.Running).toBe(true);
    } finally {
      await lease.release();
    }
  });
});
