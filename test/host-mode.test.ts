/**
 * Mode off through the CLI: tools run on the host, confined to the workspace, with a scrubbed
 * environment — and `explain` says it is not sandboxed.
 */
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { runCordon } from "./support/run-cli.js";

describe("sandbox mode off", () => {
  let root: string;
  let workspace: string;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-host-mode-"));
    workspace = path.join(root, "ws");
    await mkdir(workspace);
    await writeFile(path.join(workspace, "a.txt"), "inside\n");
    await writeFile(path.join(root, "secret.txt"), "TOPSECRET\n");
    await symlink(path.join(root, "secret.txt"), path.join(workspace, "escape"));
    const config = path.join(root, "cordon.json5");
    await writeFile(config, '{ agents: { defaults: { sandbox: { mode: "off" } } } }');
    env = {
      CORDON_HOME: path.join(root, "home"),
      CORDON_CONFIG: config,
      ANTHROPIC_API_KEY: "sk-should-not-leak",
    };
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  const tool = (name: string, input: unknown) =>
    runCordon(["tool", name, "--workspace", workspace, "--input", JSON.stringify(input)], env);

  it("explain says the run is not sandboxed, and why", async () => {
    const explain = await runCordon(["sandbox", "explain", "--workspace", workspace], env);
    expect(explain.exitCode).toBe(0);
    expect(explain.stdout).toMatch(/sandbox\s+NO — /);
    expect(explain.stdout).toContain("mode");
  });

  it("reads inside the workspace and refuses every way out", async () => {
    expect((await tool("read", { path: "a.txt" })).stdout).toContain("inside");
    for (const escape of [
      "../secret.txt",
      path.join(root, "secret.txt"),
      "escape",
      "/etc/passwd",
    ]) {
      const result = await tool("read", { path: escape });
      expect(result.exitCode, escape).toBe(1);
      expect(result.stdout + result.stderr).not.toContain("TOPSECRET");
    }
    const write = await tool("write", { path: "escape", content: "overwritten" });
    expect(write.exitCode).toBe(1);
    expect(await readFile(path.join(root, "secret.txt"), "utf8")).toBe("TOPSECRET\n");
  });

  it("exec runs in the workspace without the host's environment", async () => {
    const result = await tool("exec", { command: 'pwd; echo "key=${ANTHROPIC_API_KEY:-unset}"' });
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toContain(workspace);
    expect(result.stdout).toContain("key=unset");
  });
});
