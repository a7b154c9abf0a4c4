/**
 * `createSandbox` as an embedder uses it: the sandbox a run would get, with no model, held in an
 * `await using` block. Against the real engine: commands and files reach the container and its
 * seeded copy, never the workspace, and `remove` leaves nothing behind.
 */
import { mkdtemp, readFile, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createSandbox, type CreateSandboxOptions } from "../../src/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, removeContainersOfHome, requireSandboxImage } from "../support/docker.js";
import { removeStateDirectory } from "../support/state-directory.js";

const sessionOf = (name: string): string => `lib-${name}-${process.pid}-${Date.now().toString(36)}`;

async function containerExists(name: string): Promise<boolean> {
  return dockerClient()
    .getContainer(name)
    .inspect()
    .then(
      () => true,
      () => false,
    );
}

describe("createSandbox", () => {
  let home: string;
  let repo: string;
  const options = (sessionKey: string): CreateSandboxOptions => ({
    cwd: repo,
    workspace: repo,
    env: { ...process.env, CORDON_HOME: home, CORDON_CONFIG: "", ANTHROPIC_API_KEY: "" },
    sessionKey,
  });

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-lib-home-"));
    repo = await demoRepo();
  });

  afterAll(async () => {
    await removeContainersOfHome(home);
    await removeStateDirectory(home);
  });

  it("runs commands and edits files in the seeded copy, and removes it all with `remove`", async () => {
    let container: string | undefined;
    let copy: string | undefined;
    {
      await using box = await createSandbox({ ...options(sessionOf("rm")), remove: true });
      container = box.plan.sandbox.spec?.containerName ?? "";
      copy = box.privateWorkspace;
      await box.sandbox.files.writeFile("pricing.py", new TextEncoder().encode("PRICE = 1\n"));
      const result = await box.sandbox.exec("cat pricing.py && id -u");
      expect(result.exitCode).toBe(0);
      expect(result.stdout).toMatch(/^PRICE = 1\n\d+\n$/);
      expect(await containerExists(container)).toBe(true);
      expect(copy).toBeDefined();
    }
    // The real workspace is untouched; the sandbox and its copy are gone.
    expect(await readFile(path.join(repo, "pricing.py"), "utf8")).not.toBe("PRICE = 1\n");
    expect(await containerExists(container ?? "")).toBe(false);
    await expect(stat(copy ?? "")).rejects.toThrow(/ENOENT/);
  });

  it("keeps the sandbox for the next acquire without `remove`, files included", async () => {
    const sessionKey = sessionOf("keep");
    const first = await createSandbox(options(sessionKey));
    await first.sandbox.exec("echo kept > note.txt");
    await first.release();
    await first.release(); // a second release does nothing

    await using again = await createSandbox(options(sessionKey));
    expect(again.plan.sandbox.spec?.containerName).toBe(first.plan.sandbox.spec?.containerName);
    expect((await again.sandbox.exec("cat note.txt")).stdout).toBe("kept\n");
  });
});
