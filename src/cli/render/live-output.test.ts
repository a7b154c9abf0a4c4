import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { createSilentLogger } from "../../common/index.js";
import {
  JsonlSession,
  runAgentLoop,
  ScriptedModelClient,
  type RunEvent,
  type RunnerToolset,
} from "../../runner/index.js";
import { builtinTools, createToolset } from "../../tools/index.js";
import { MemorySandbox } from "../../tools/testing/index.js";
import { createRunRenderer } from "./run-renderer.js";

/**
 * The whole path of a running command's output, without Docker: the exec tool over a sandbox
 * whose command prints as it goes → the loop's `tool-output` events → the text renderer's live
 * line and result line.
 */
describe("live tool output, loop to renderer", () => {
  let stateDir: string;
  beforeEach(async () => {
    stateDir = await mkdtemp(path.join(tmpdir(), "cordon-live-"));
  });
  afterEach(async () => {
    await rm(stateDir, { recursive: true, force: true });
  });

  it("streams a command's lines as tool-output events before its result, in order", async () => {
    const sandbox = new MemorySandbox({
      exec: () => ({
        chunks: [
          { stdout: "collecting\n" },
          { stdout: "test 1 ok\n", afterMs: 300 },
          { stderr: "warning: slow\n", afterMs: 300 },
          { stdout: "test 2 ok\n\n3 passed\n\n", afterMs: 300 },
        ],
      }),
    });
    const toolset = createToolset({ tools: builtinTools(), allowed: ["exec"] });
    const runnerToolset: RunnerToolset = {
      specs: toolset.specs,
      call: (name, input, context) =>
        toolset.call(name, input, { ...context, sandbox, logger: createSilentLogger() }),
    };
    const session = await JsonlSession.open({ stateDir, sessionKey: "agent:main:live" });
    const events: RunEvent[] = [];
    let stderr = "";
    const live: string[] = [];
    const renderer = createRunRenderer({
      format: "text",
      stdout: () => undefined,
      stderr: (text) => (stderr += text),
      live: { show: (line) => live.push(line), clear: () => undefined },
    });
    try {
      await runAgentLoop({
        model: new ScriptedModelClient({
          version: 1,
          turns: [
            { content: [{ type: "tool_use", name: "exec", input: { command: "make test" } }] },
            { content: [{ type: "text", text: "All pass." }] },
          ],
        }),
        modelId: "m",
        toolset: runnerToolset,
        session,
        systemPrompt: "system",
        prompt: "run the tests",
        io: {
          onEvent: (event) => {
            events.push(event);
            renderer.onEvent(event);
          },
        },
      });
    } finally {
      await session.close();
    }

    const types = events.map((event) => event.type);
    const outputs = events.filter((event) => event.type === "tool-output");
    expect(outputs.length).toBeGreaterThanOrEqual(2);
    const firstOutput = types.indexOf("tool-output");
    expect(types.indexOf("tool-call")).toBeLessThan(firstOutput);
    expect(types.lastIndexOf("tool-output")).toBeLessThan(types.indexOf("tool-result"));
    expect(outputs.map((event) => event.text).join("")).toBe(
      "collecting\ntest 1 ok\nwarning: slow\ntest 2 ok\n\n3 passed\n\n",
    );
    expect(outputs.at(-1)).toMatchObject({ name: "exec", lastLine: "3 passed", omittedChars: 0 });

    expect(live[0]).toBe("collecting");
    expect(live.at(-1)).toBe("3 passed");
    expect(stderr).toContain("→ exec make test\n  exit 0: 3 passed\n");
  });
});
