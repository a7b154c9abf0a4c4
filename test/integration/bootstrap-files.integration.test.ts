/**
 * Prompt modes and the workspace's bootstrap files, as a user runs them: the built CLI against a
 * local Messages API server, asserting on the system prompt the server received. The workspace is
 * hostile: its USER.md and IDENTITY.md are symbolic links to a secret on the host and to
 * /etc/shadow, which must not reach the prompt, sandboxed (the container is the only filesystem)
 * or not (the host sandbox refuses a link out of the workspace).
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import { createRunner } from "../../src/runner/index.js";
import { demoRepo, git } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { startMessagesApiServer, type MessagesApiServer } from "../support/messages-api-server.js";
import { removeStateDirectory } from "../support/state-directory.js";

const cli = path.join(packageRoot(), "dist", "cli", "main.js");
const hostSecret = `HOST-SECRET-${process.pid}-${Date.now().toString(36)}`;

describe("bootstrap files and prompt modes through the CLI", () => {
  let home: string;
  let repo: string;
  let outside: string;
  let server: MessagesApiServer;
  const session = `bootstrap-${process.pid}`;

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-bootstrap-home-"));
    outside = await mkdtemp(path.join(tmpdir(), "cordon-bootstrap-outside-"));
    await writeFile(path.join(outside, "secret.txt"), `${hostSecret}\n`);
    await writeFile(
      path.join(outside, "none.json5"),
      `{ agents: { defaults: { promptMode: "none" } } }`,
    );
    repo = await demoRepo();
    await writeFile(path.join(repo, "AGENTS.md"), "Run the tests with `python -m pytest`.\n");
    await writeFile(path.join(repo, "SOUL.md"), "Be terse; say what you changed.\n");
    await symlink(path.join(outside, "secret.txt"), path.join(repo, "USER.md"));
    await symlink("/etc/shadow", path.join(repo, "IDENTITY.md"));
    git(repo, "add", "-A");
    git(repo, "commit", "-qm", "agent notes");
    server = await startMessagesApiServer();
  });

  afterAll(async () => {
    await server.close();
    const runner = createRunner({ env: { CORDON_HOME: home }, workspace: repo });
    const name = (await runner.plan({ sessionKey: session })).sandbox.spec?.containerName;
    if (name) {
      await dockerClient()
        .getContainer(name)
        .remove({ force: true })
        .catch(() => undefined);
    }
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
    await rm(outside, { recursive: true, force: true });
  });

  /** One `cordon run`; resolves with its exit code and the system prompt the server received. */
  async function systemPromptOf(env: NodeJS.ProcessEnv, ...flags: string[]) {
    server.enqueue({ kind: "message", content: [{ type: "text", text: "done" }] });
    const before = server.requests.length;
    const child = spawn(
      process.execPath,
      [cli, "run", "--workspace", repo, "--session", session, ...flags, "say done"],
      {
        env: {
          PATH: process.env["PATH"],
          HOME: process.env["HOME"],
          CORDON_HOME: home,
          CORDON_LOG_LEVEL: "silent",
          ANTHROPIC_API_KEY: "test-key",
          ANTHROPIC_BASE_URL: server.url,
          ...env,
        },
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    const body = server.requests[before]?.body as { system?: unknown } | undefined;
    return { code, stderr, system: JSON.stringify(body?.system ?? "") };
  }

  it("sandboxed: AGENTS.md and SOUL.md reach the system prompt; the linked files read nothing from the host", async () => {
    const { code, stderr, system } = await systemPromptOf({});
    expect(code, stderr).toBe(0);
    expect(system).toContain("### AGENTS.md");
    expect(system).toContain("Run the tests with `python -m pytest`.");
    expect(system).toContain("### SOUL.md");
    expect(system).toContain("Be terse; say what you changed.");
    expect(system).not.toContain(hostSecret);
  });

  it("on the host (mode off): a link out of the workspace is refused, the real files are read", async () => {
    const { code, stderr, system } = await systemPromptOf({ CORDON_SANDBOX_MODE: "off" });
    expect(code, stderr).toBe(0);
    expect(system).toContain("Be terse; say what you changed.");
    expect(system).not.toContain(hostSecret);
    expect(system).not.toContain("### USER.md");
    expect(system).not.toContain("### IDENTITY.md");
  });

  it("promptMode none drops them", async () => {
    const { code, stderr, system } = await systemPromptOf(
      { CORDON_SANDBOX_MODE: "off" },
      "--config",
      path.join(outside, "none.json5"),
    );
    expect(code, stderr).toBe(0);
    expect(system).toContain("You are a coding agent");
    expect(system).not.toContain("AGENTS.md");
    expect(system).not.toContain("Be terse");
    expect(system).not.toContain("## Safety");
  });
});
