/**
 * The agent runtime as a user drives it: the built CLI (`node dist/cli/main.js run`) against a
 * local Messages API server, through the real SDK. Thinking levels and their step-down on the
 * API's rejection, and a tool call past its time limit stopped in a real sandbox.
 */
import { execFile, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import { createRunner } from "../../src/runner/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import {
  startMessagesApiServer,
  type MessagesApiServer,
  type MessagesApiServerOptions,
  type ScriptedResponse,
} from "../support/messages-api-server.js";
import { removeStateDirectory } from "../support/state-directory.js";

interface Envelope {
  type: string;
  [key: string]: unknown;
}

const cli = path.join(packageRoot(), "dist", "cli", "main.js");
const suffix = `${process.pid}-${Date.now().toString(36)}`;

describe("the agent runtime through the built CLI", () => {
  let home: string;
  let repo: string;
  let server: MessagesApiServer | undefined;
  const containers: string[] = [];

  /** A config file named with --config (so trusted, as in CI), in a directory of its own. */
  async function configFile(config: Record<string, unknown>): Promise<string> {
    const dir = await mkdtemp(path.join(home, "config-"));
    const file = path.join(dir, "cordon.json5");
    await writeFile(file, JSON.stringify(config));
    return file;
  }

  async function cordonRun(
    args: string[],
    responses: ScriptedResponse[],
    options: MessagesApiServerOptions = {},
  ): Promise<{ code: number | null; events: Envelope[]; stderr: string; api: MessagesApiServer }> {
    await server?.close();
    const api = await startMessagesApiServer(options);
    server = api;
    api.enqueue(...responses);
    const child = spawn(
      process.execPath,
      [cli, "run", "--workspace", repo, "--output-format", "stream-json", ...args],
      {
        env: {
          PATH: process.env["PATH"],
          HOME: process.env["HOME"],
          CORDON_HOME: home,
          CORDON_LOG_LEVEL: "silent",
          ANTHROPIC_API_KEY: "test-key",
          ANTHROPIC_BASE_URL: api.url,
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    const events = stdout
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line) => JSON.parse(line) as Envelope);
    return { code, events, stderr, api };
  }

  const text = (value: string): ScriptedResponse => ({
    kind: "message",
    content: [{ type: "text", text: value }],
  });

  beforeAll(async () => {
    home = await mkdtemp(path.join(tmpdir(), "cordon-agent-runtime-"));
    repo = await demoRepo();
  });
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });
  afterAll(async () => {
    for (const name of containers) {
      await dockerClient()
        .getContainer(name)
        .remove({ force: true })
        .catch(() => undefined);
    }
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  describe("thinking levels (host mode: no sandbox needed to see the request)", () => {
    let hostConfig: string;
    beforeAll(async () => {
      hostConfig = await configFile({ agents: { defaults: { sandbox: { mode: "off" } } } });
    });

    it("--thinking high reaches the request with its budget, max_tokens raised to fit", async () => {
      const run = await cordonRun(
        ["--config", hostConfig, "--session", "think-high", "--thinking", "high", "explain"],
        [text("thought about it")],
      );
      expect(run.code).toBe(0);
      expect(run.api.requests[0]?.thinking).toEqual({ type: "enabled", budget_tokens: 24_000 });
      expect((run.api.requests[0]?.body as { max_tokens: number }).max_tokens).toBe(28_096);
    });

    it("steps down one level per rejection, with an event per step, and finishes", async () => {
      // The model takes at most 5000 thinking tokens: high (24000) and medium (10000) are refused.
      const run = await cordonRun(
        [
          ...["--config", hostConfig, "--session", "think-down", "--model", "small-thinker"],
          ...["--thinking", "high", "explain"],
        ],
        [text("thought a little")],
        { thinkingLimits: { "small-thinker": 5000 } },
      );
      expect(run.code).toBe(0);
      expect(run.api.requests.map((request) => request.thinking?.budget_tokens)).toEqual([
        24_000, 10_000, 4096,
      ]);
      const steps = run.events.filter((event) => event.type === "thinking-downgrade");
      expect(steps.map((step) => step["to"])).toEqual(["medium", "low"]);
      expect(String(steps[0]?.["error"])).toMatch(/budget_tokens: 24000 is greater/);
      expect(run.events.at(-1)).toMatchObject({ type: "run-end", status: "completed" });
    });

    it("agents.*.thinking is the default; a model without thinking steps down to off", async () => {
      const config = await configFile({
        agents: { defaults: { sandbox: { mode: "off" }, thinking: "minimal" } },
      });
      const run = await cordonRun(
        ["--config", config, "--session", "think-config", "--model", "no-thinker", "explain"],
        [text("no thinking here")],
        { thinkingLimits: { "no-thinker": 0 } },
      );
      expect(run.code).toBe(0);
      expect(run.api.requests.map((request) => request.thinking)).toEqual([
        { type: "enabled", budget_tokens: 1024 },
        undefined,
      ]);
      expect(run.events.filter((event) => event.type === "thinking-downgrade")).toMatchObject([
        { to: "off" },
      ]);
    });

    it("refuses an unknown level before anything runs", async () => {
      const run = await cordonRun(
        ["--config", hostConfig, "--session", "think-bad", "--thinking", "maximal", "x"],
        [],
      );
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/--thinking.*maximal.*off, minimal, low, medium, high, xhigh/s);
      expect(run.api.requests).toHaveLength(0);
    });
  });

  describe("context (host mode)", () => {
    it("a long session is compacted in chunks before the request that would not fit; the newest message goes verbatim", async () => {
      const roomy = await configFile({ agents: { defaults: { sandbox: { mode: "off" } } } });
      const history = (n: number) => `OLD-${n} ${"notes from a long investigation. ".repeat(625)}`;
      for (const n of [1, 2, 3, 4]) {
        const earlier = await cordonRun(
          ["--config", roomy, "--session", "long", history(n)],
          [text(`noted ${n}`)],
        );
        expect(earlier.code).toBe(0);
      }
      // The same session with a 24k-token window: ~20k tokens of history, the system prompt, the
      // tool schemas and 8192 of max_tokens do not fit, so the guard compacts before sending.
      const tight = await configFile({
        agents: { defaults: { sandbox: { mode: "off" }, contextWindow: 24_000 } },
      });
      let summaries = 0;
      const newest = "NEWEST: now add the changelog entry for the pricing fix";
      const run = await cordonRun(
        ["--config", tight, "--session", "long", newest],
        [text("changelog entry added")],
        {
          respond: (body) => {
            if (!JSON.stringify(body["system"]).includes("summarise")) return undefined;
            const merging = JSON.stringify(body["messages"]).includes("Part 1:");
            summaries += 1;
            return text(
              merging ? "MERGED: four long notes, nothing changed yet" : `part ${summaries}`,
            );
          },
        },
      );
      expect(run.code).toBe(0);
      const compaction = run.events.find((event) => event.type === "compaction");
      expect(compaction).toMatchObject({ attempt: 1 });
      expect(Number(compaction?.["chunks"])).toBeGreaterThan(1);
      // One summary call per chunk, then the merge.
      expect(summaries).toBe(Number(compaction?.["chunks"]) + 1);
      const last = run.api.requests.at(-1)?.body as { messages: { content: unknown }[] };
      const sent = JSON.stringify(last.messages);
      expect(JSON.stringify(last.messages[0])).toMatch(/MERGED: four long notes/);
      expect(sent).not.toContain("OLD-1");
      // (The wire adds cache_control to the last block; the text is the user's, untouched.)
      expect(last.messages.at(-1)?.content).toMatchObject([{ type: "text", text: newest }]);
      expect(run.events.at(-1)).toMatchObject({ status: "completed" });
    });

    it("a role-ordering error is reported as such: no fallback, no hint about the model name", async () => {
      const config = await configFile({
        model: { primary: "primary-model", fallbacks: ["backup-model"] },
        agents: { defaults: { sandbox: { mode: "off" } } },
      });
      const run = await cordonRun(
        ["--config", config, "--session", "roles", "--output-format", "text", "go"],
        [
          {
            kind: "error",
            status: 400,
            errorType: "invalid_request_error",
            message:
              'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row',
          },
        ],
      );
      expect(run.code).toBe(4);
      expect(run.api.requests).toHaveLength(1);
      expect(run.stderr).toMatch(/messages are out of order/);
      expect(run.stderr).not.toMatch(/falling back|model name/);
    });
  });

  it("a tool call past tools.callTimeoutSec is stopped in the sandbox and reported to the model", async () => {
    await requireSandboxImage();
    const config = await configFile({ tools: { callTimeoutSec: 2 } });
    const session = `timeout-${suffix}`;
    // A fraction unique to this test run, so the process scan below cannot match anything else.
    const marker = `37.${process.pid}`;
    const run = await cordonRun(
      ["--config", config, "--session", session, "run the long job"],
      [
        {
          kind: "message",
          content: [
            {
              type: "tool_use",
              id: "toolu_long",
              name: "exec",
              input: { command: `sleep ${marker}; touch finished`, timeoutSec: 120 },
            },
          ],
        },
        text("The job took too long; I stopped."),
      ],
    );
    const runner = createRunner({
      env: { CORDON_HOME: home },
      workspace: repo,
      configPath: config,
    });
    const container = (await runner.plan({ sessionKey: session })).sandbox.spec?.containerName;
    if (container) containers.push(container);

    expect(run.code).toBe(0);
    expect(run.events.find((event) => event.type === "tool-timeout")).toMatchObject({
      name: "exec",
      toolCallId: "toolu_long",
      timeoutMs: 2000,
    });
    const answer = run.events.find((event) => event.type === "tool-result");
    expect(answer).toMatchObject({ isError: true });
    expect(JSON.stringify(answer)).toMatch(/stopped after 2 s.*tools\.callTimeoutSec/);
    // The model saw it, and the run went on to its answer.
    const secondRequest = JSON.stringify(run.api.requests[1]?.body);
    expect(secondRequest).toMatch(/stopped after 2 s/);
    expect(run.events.at(-1)).toMatchObject({ status: "completed" });
    // The command is gone from the container, not left running behind the answer.
    expect(container).toBeDefined();
    const { stdout } = await promisify(execFile)("docker", [
      "exec",
      container ?? "",
      "ps",
      "-eo",
      "args",
    ]);
    expect(stdout).not.toContain(`sleep ${marker}`);
  });
});
