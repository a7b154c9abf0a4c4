/**
 * Several API keys, as a user runs them: the built CLI (`node dist/cli/main.js run`) in child
 * processes sharing one CORDON_HOME, against a local Messages API server that answers per key.
 * The sandbox is off (tools are not the point here), so no container is started.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import {
  startMessagesApiServer,
  type MessagesApiServer,
  type ScriptedResponse,
} from "../support/messages-api-server.js";
import { removeStateDirectory } from "../support/state-directory.js";

const cli = path.join(packageRoot(), "dist", "cli", "main.js");
const secrets = ["sk-ant-first-5ecret", "sk-ant-second-5ecret"] as const;

describe("cordon run with several API keys", () => {
  let home: string;
  let workspace: string;
  let server: MessagesApiServer;

  beforeAll(async () => {
    workspace = await mkdtemp(path.join(tmpdir(), "cordon-keys-workspace-"));
  });
  afterAll(async () => {
    await rm(workspace, { recursive: true, force: true });
  });
  beforeEach(async () => {
    home = await mkdtemp(path.join(tmpdir(), "cordon-keys-home-"));
    server = await startMessagesApiServer();
  });
  afterEach(async () => {
    await server.close();
    await removeStateDirectory(home);
  });

  function cordonRun(prompt: string): Promise<{ code: number | null; output: string }> {
    const child = spawn(process.execPath, [cli, "run", "--workspace", workspace, prompt], {
      env: {
        PATH: process.env["PATH"],
        HOME: process.env["HOME"],
        CORDON_HOME: home,
        CORDON_SANDBOX_MODE: "off",
        // Everything cordon logs, to show that no key is in it.
        CORDON_LOG_LEVEL: "debug",
        ANTHROPIC_API_KEYS: secrets.join(","),
        ANTHROPIC_BASE_URL: server.url,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    return new Promise((resolve) => child.on("close", (code) => resolve({ code, output })));
  }

  const answer = (text: string): ScriptedResponse => ({
    kind: "message",
    content: [{ type: "text", text }],
  });
  const keysUsed = (): (string | undefined)[] => server.requests.map((request) => request.apiKey);

  /** Every file cordon wrote under CORDON_HOME, concatenated. */
  async function stateText(): Promise<string> {
    const files = await readdir(home, { recursive: true, withFileTypes: true });
    const texts = await Promise.all(
      files
        .filter((entry) => entry.isFile())
        .map((entry) => readFile(path.join(entry.parentPath, entry.name), "utf8")),
    );
    return texts.join("\n");
  }

  it("429 on the first key: the second answers, and a second process during the cooldown starts with it", async () => {
    server.enqueueForKey(secrets[0], {
      kind: "error",
      status: 429,
      errorType: "rate_limit_error",
      message: "Number of requests has exceeded your rate limit",
      headers: { "retry-after": "120" },
    });
    server.enqueue(answer("first run done"), answer("second run done"));

    const first = await cordonRun("first task");
    expect(first.code).toBe(0);
    expect(first.output).toContain("first run done");
    expect(keysUsed()).toEqual([secrets[0], secrets[1]]);
    expect(first.output).toMatch(
      /· retry 1\/1 in 0\.0s: The model API rate limit was hit: .*\(key ANTHROPIC_API_KEYS#1 \([0-9a-f]{12}\)\); trying key ANTHROPIC_API_KEYS#2 \([0-9a-f]{12}\)/,
    );

    // By last use alone the first key would be next; its cooldown (retry-after: 120 s) says no.
    const second = await cordonRun("second task");
    expect(second.code).toBe(0);
    expect(second.output).toContain("second run done");
    expect(keysUsed()).toEqual([secrets[0], secrets[1], secrets[1]]);

    for (const secret of secrets) {
      expect(first.output + second.output).not.toContain(secret);
      expect(await stateText()).not.toContain(secret);
    }
  });

  it("every key unauthorised: exit 4 and one sentence saying so", async () => {
    for (const secret of secrets) {
      server.enqueueForKey(secret, {
        kind: "error",
        status: 401,
        errorType: "authentication_error",
        message: "invalid x-api-key",
      });
    }
    const run = await cordonRun("any task");
    expect(run.code).toBe(4);
    expect(run.output).toMatch(
      /The model API rejected every API key: ANTHROPIC_API_KEYS#1 \([0-9a-f]{12}\), ANTHROPIC_API_KEYS#2 \([0-9a-f]{12}\)\./,
    );
    expect(keysUsed()).toEqual([...secrets]);
    for (const secret of secrets) expect(run.output).not.toContain(secret);
  });
});
