import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { AbortedError, ConfigError } from "../../common/index.js";
import { ModelApiError } from "./model-errors.js";
import { ScriptedModelClient } from "./scripted-model-client.js";
import { completeTurn, type ModelRequest } from "./types.js";

const request: ModelRequest = {
  model: "m",
  system: "sys",
  messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
  tools: [],
  maxTokens: 100,
};

describe("ScriptedModelClient", () => {
  it("plays turns in order, fills ids and stop reasons, and records requests", async () => {
    const model = new ScriptedModelClient({
      version: 1,
      turns: [
        { content: [{ type: "tool_use", name: "exec", input: { command: "ls" } }] },
        { content: [{ type: "text", text: "done" }] },
      ],
    });
    const first = await completeTurn(model, request);
    expect(first.stopReason).toBe("tool_use");
    expect(first.message.content[0]).toMatchObject({
      type: "tool_use",
      name: "exec",
      input: { command: "ls" },
    });
    expect((first.message.content[0] as { id: string }).id).toMatch(/^toolu_scripted_/);
    const second = await completeTurn(model, { ...request, model: "other" });
    expect(second.stopReason).toBe("end_turn");
    expect(model.requests.map((r) => r.model)).toEqual(["m", "other"]);
    expect(model.remainingTurns).toBe(0);
    await expect(completeTurn(model, request)).rejects.toThrow(/no turn left/);
  });

  it("injects scripted errors with their kind", async () => {
    const model = new ScriptedModelClient({
      version: 1,
      turns: [{ error: { kind: "rate_limited", retryAfterMs: 5 } }],
    });
    const error: unknown = await completeTurn(model, request).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelApiError);
    expect(error).toMatchObject({ kind: "rate_limited", retryAfterMs: 5, transient: true });
  });

  it("marks the last tool call of a max_tokens turn as truncated", async () => {
    const model = new ScriptedModelClient({
      version: 1,
      turns: [
        {
          content: [{ type: "tool_use", id: "t", name: "write", input: {} }],
          stopReason: "max_tokens",
        },
      ],
    });
    const turn = await completeTurn(model, request);
    expect(turn.message.content[0]).toMatchObject({ id: "t", truncated: true });
  });

  it("waits for abort when told to", async () => {
    const model = new ScriptedModelClient({ version: 1, turns: [{ waitForAbort: true }] });
    const controller = new AbortController();
    const pending = completeTurn(model, { ...request, signal: controller.signal });
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(AbortedError);
  });

  it("waits for a gate file before answering, and an abort ends the wait", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "cordon-gate-"));
    try {
      const gate = path.join(dir, "open");
      const model = new ScriptedModelClient({
        version: 1,
        turns: [
          { waitForFile: gate, content: [{ type: "text", text: "after the gate" }] },
          { waitForFile: path.join(dir, "never") },
        ],
      });
      let answered = false;
      const pending = completeTurn(model, request).then((turn) => {
        answered = true;
        return turn;
      });
      // The call is still waiting after many polls: nothing answers before the gate opens.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(answered).toBe(false);
      await writeFile(gate, "");
      expect((await pending).message.content).toEqual([{ type: "text", text: "after the gate" }]);

      const controller = new AbortController();
      const waiting = completeTurn(model, { ...request, signal: controller.signal });
      controller.abort();
      await expect(waiting).rejects.toThrow();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("rejects an invalid script with path: message", () => {
    expect(
      () =>
        new ScriptedModelClient({ version: 1, turns: [{ content: [{ type: "nope" }] }] } as never),
    ).toThrow(/turns\.0\.content\.0/);
    expect(() => new ScriptedModelClient({ version: 2, turns: [] } as never)).toThrow(ConfigError);
  });

  it("loads a script file", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "cordon-script-"));
    try {
      const file = path.join(dir, "script.json");
      await writeFile(
        file,
        JSON.stringify({ version: 1, turns: [{ content: [{ type: "text", text: "x" }] }] }),
      );
      const model = await ScriptedModelClient.fromFile(file);
      expect((await completeTurn(model, request)).message.content).toEqual([
        { type: "text", text: "x" },
      ]);
      await writeFile(file, "{not json");
      await expect(ScriptedModelClient.fromFile(file)).rejects.toBeInstanceOf(ConfigError);
      // A mistyped path is the user's to fix (exit 2), not an internal error.
      const missing = path.join(dir, "nope.json");
      const error = await ScriptedModelClient.fromFile(missing).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).message).toBe(`The model script ${missing} does not exist.`);
      await expect(ScriptedModelClient.fromFile(dir)).rejects.toThrow(/is a directory/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
