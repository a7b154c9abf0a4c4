import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";

import { MemorySandbox } from "./tools/testing/index.js";
import {
  ScriptedModelClient,
  createRunner,
  defineTool,
  textResult,
  type RunnerEvent,
  type SandboxProvider,
} from "./index.js";

/** The public entry point as an embedder uses it: custom tool, events, policy, no Docker. */
describe("the library API", () => {
  let home: string;
  let workspace: string;
  beforeEach(async () => {
    home = await mkdtemp(path.join(tmpdir(), "cordon-lib-home-"));
    workspace = await mkdtemp(path.join(tmpdir(), "cordon-lib-ws-"));
  });
  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
    await rm(workspace, { recursive: true, force: true });
  });

  const countLines = defineTool({
    name: "count_lines",
    description: "Counts the lines of a file.",
    inputSchema: z.object({ path: z.string() }),
    async execute(input: { path: string }, { sandbox, signal }) {
      const text = new TextDecoder().decode(await sandbox.files.readFile(input.path, { signal }));
      return textResult(String(text.split("\n").length - 1));
    },
  });

  function setup(config: Record<string, unknown>) {
    const sandbox = new MemorySandbox({ files: { "a.txt": "1\n2\n3\n" } });
    const sandboxes: SandboxProvider = {
      acquire: () => Promise.resolve({ sandbox, fresh: true, release: () => Promise.resolve() }),
    };
    const model = new ScriptedModelClient({
      version: 1,
      turns: [
        { content: [{ type: "tool_use", name: "count_lines", input: { path: "a.txt" } }] },
        { content: [{ type: "text", text: "3 lines" }] },
      ],
    });
    const runner = createRunner({
      env: { CORDON_HOME: home },
      cwd: workspace,
      configOverrides: config,
      model,
      tools: [countLines],
      sandboxes,
    });
    return { runner, model };
  }

  it("offers a custom tool the policy allows and runs it in the provided sandbox", async () => {
    const { runner, model } = setup({ tools: { alsoAllow: ["count_lines"] } });
    const events: RunnerEvent[] = [];
    const result = await runner.run({ prompt: "count", onEvent: (event) => events.push(event) });
    expect(result).toMatchObject({ status: "completed", exitCode: 0, finalText: "3 lines" });
    expect(model.requests[0]?.tools.map((tool) => tool.name)).toContain("count_lines");
    const toolResult = events.find((event) => event.type === "tool-result");
    expect(toolResult).toMatchObject({ isError: false, content: [{ type: "text", text: "3" }] });
  });

  it("does not offer a custom tool the profile leaves out, and refuses a call to it", async () => {
    const { runner, model } = setup({});
    const events: RunnerEvent[] = [];
    await runner.run({ prompt: "count", onEvent: (event) => events.push(event) });
    expect(model.requests[0]?.tools.map((tool) => tool.name)).not.toContain("count_lines");
    expect(events.find((event) => event.type === "tool-result")).toMatchObject({ isError: true });
  });

  it("a config error before any model call is a result with exit 2, and one run-end", async () => {
    const { runner, model } = setup({ sandbox: { mode: "sometimes" } });
    const events: RunnerEvent[] = [];
    const result = await runner.run({ prompt: "x", onEvent: (event) => events.push(event) });
    expect(result).toMatchObject({ status: "config_error", exitCode: 2 });
    expect(events.filter((event) => event.type === "run-end")).toHaveLength(1);
    expect(model.requests).toHaveLength(0);
  });
});
