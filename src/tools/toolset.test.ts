import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createSilentLogger, FileOperationError, SandboxError } from "../common/index.js";
import { builtinTools } from "./builtin/index.js";
import { MemorySandbox } from "./testing/memory-sandbox.js";
import { createToolset, defineTool, textResult, type ToolContext } from "./index.js";

function context(sandbox = new MemorySandbox()): ToolContext {
  return {
    sandbox,
    signal: new AbortController().signal,
    logger: createSilentLogger(),
    toolCallId: "t1",
  };
}

function textOf(result: { content: Array<{ type: string; text?: string }> }): string {
  return result.content.map((part) => part.text ?? "").join("\n");
}

const throwing = (error: unknown) =>
  defineTool({
    name: "boom",
    description: "throws",
    inputSchema: z.strictObject({ path: z.string() }),
    execute: () => {
      throw error;
    },
  });

describe("createToolset", () => {
  it("offers only allowed tools, in registration order, as object JSON Schemas", () => {
    const toolset = createToolset({ tools: builtinTools(), allowed: ["grep", "read", "ls"] });
    expect(toolset.names).toEqual(["read", "ls", "grep"]);
    expect(toolset.specs.map((spec) => spec.name)).toEqual(["read", "ls", "grep"]);
  });

  it("gives every built-in tool a top-level object schema with described properties", () => {
    const names = builtinTools().map((tool) => tool.name);
    const toolset = createToolset({ tools: builtinTools(), allowed: names });
    expect(toolset.names).toEqual(names);
    for (const spec of toolset.specs) {
      expect(spec.inputSchema["type"], spec.name).toBe("object");
      expect(spec.inputSchema["$schema"]).toBeUndefined();
      expect(spec.inputSchema["additionalProperties"], spec.name).toBe(false);
      expect(spec.description.length, spec.name).toBeGreaterThan(40);
    }
    const read = toolset.specs.find((spec) => spec.name === "read");
    expect(read?.inputSchema["required"]).toEqual(["path"]);
  });

  it("refuses a registered tool that policy does not allow, with the policy's message", async () => {
    const sandbox = new MemorySandbox({ files: { "a.txt": "x" } });
    const toolset = createToolset({
      tools: builtinTools(),
      allowed: ["read"],
      refusal: (name) => `${name} is denied by agents.list[0].tools.deny`,
    });
    const result = await toolset.call("write", { path: "a.txt", content: "y" }, context(sandbox));
    expect(result).toEqual({
      isError: true,
      content: [{ type: "text", text: "write is denied by agents.list[0].tools.deny" }],
    });
    expect(sandbox.files.getText("a.txt")).toBe("x");
    expect(sandbox.calls).toEqual([]);
  });

  it("refuses with a default message when no refusal callback is given", async () => {
    const toolset = createToolset({ tools: builtinTools(), allowed: [] });
    const result = await toolset.call("exec", { command: "true" }, context());
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/not allowed in this run by policy/);
  });

  it("answers an unknown tool name with the tools that exist", async () => {
    const toolset = createToolset({ tools: builtinTools(), allowed: ["read", "ls"] });
    const result = await toolset.call("rm_rf", {}, context());
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe('There is no tool named "rm_rf". Available tools: read, ls.');
  });

  it("rejects invalid input before running anything, naming each field to fix", async () => {
    const sandbox = new MemorySandbox();
    const toolset = createToolset({ tools: builtinTools(), allowed: ["read"] });
    const result = await toolset.call("read", { file_path: "a", offset: 0 }, context(sandbox));
    expect(result.isError).toBe(true);
    const text = textOf(result);
    expect(text).toMatch(/^Invalid input for tool "read"; nothing was run/);
    expect(text).toMatch(/- path: /);
    expect(text).toMatch(/- offset: .*>=1/);
    expect(text).toMatch(/- \(input\): Unrecognized key: "file_path"/);
    expect(text).toMatch(/Expected input: \{ path: string, offset\?: integer, limit\?: integer \}/);
    expect(sandbox.calls).toEqual([]);
  });

  it.each([null, undefined, "a string", 42, [1, 2]])(
    "rejects a non-object input %j as a result, not an exception",
    async (input) => {
      const toolset = createToolset({ tools: builtinTools(), allowed: ["ls"] });
      const result = await toolset.call("ls", input, context());
      expect(result.isError).toBe(true);
      expect(textOf(result)).toMatch(/Invalid input for tool "ls"/);
    },
  );

  it("turns each FileOperationError reason into a sentence with a next step", async () => {
    const cases: Array<[FileOperationError, RegExp]> = [
      [
        new FileOperationError("EROFS", "read_only", "/agent/src/x.ts"),
        /\/agent\/src\/x\.ts: it is on a read-only mount \(\/agent is read-only in workspaceAccess ro\)\. Write under \/workspace/,
      ],
      [
        new FileOperationError("EROFS", "read_only", "/etc/x"),
        /read-only mount \(the sandbox root filesystem/,
      ],
      [new FileOperationError("ENOENT", "not_found", "/w/x"), /\/w\/x does not exist/],
      [
        new FileOperationError("EACCES", "permission_denied", "/root"),
        /Permission denied for \/root/,
      ],
      [new FileOperationError("EISDIR", "is_directory", "/w"), /is a directory/],
      [new FileOperationError("ENOTDIR", "not_directory", "/w/f/x"), /is a file, not a directory/],
      [new FileOperationError("escape", "outside_sandbox", "../../etc"), /outside the sandbox/],
      [new FileOperationError("big", "too_large", "/w/big"), /too large/],
      [new FileOperationError("EEXIST", "exists", "/w/x"), /already exists/],
      [new FileOperationError("weird", "other", "/w/x"), /\/w\/x: weird/],
    ];
    for (const [error, message] of cases) {
      const toolset = createToolset({ tools: [throwing(error)], allowed: ["boom"] });
      const result = await toolset.call("boom", { path: "x" }, context());
      expect(result.isError).toBe(true);
      expect(textOf(result)).toMatch(message);
    }
  });

  it("turns any other thrown value into an error result without a stack trace", async () => {
    for (const error of [
      new Error("kaput"),
      "a string",
      new SandboxError("container is gone", { fix: "run cordon sandbox list" }),
    ]) {
      const toolset = createToolset({ tools: [throwing(error)], allowed: ["boom"] });
      const result = await toolset.call("boom", { path: "x" }, context());
      expect(result.isError).toBe(true);
      expect(textOf(result)).not.toMatch(/at .*\.ts:\d+/);
    }
    const sandboxFailure = createToolset({
      tools: [throwing(new SandboxError("container is gone", { fix: "run cordon sandbox list" }))],
      allowed: ["boom"],
    });
    const result = await sandboxFailure.call("boom", { path: "x" }, context());
    expect(textOf(result)).toBe("container is gone\nFix: run cordon sandbox list");
  });

  it("does not start a call whose signal has already fired", async () => {
    const sandbox = new MemorySandbox();
    const toolset = createToolset({ tools: builtinTools(), allowed: ["exec"] });
    const controller = new AbortController();
    controller.abort();
    const result = await toolset.call(
      "exec",
      { command: "rm -rf build" },
      { ...context(sandbox), signal: controller.signal },
    );
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/aborted before it started; nothing was run/);
    expect(sandbox.calls).toEqual([]);
  });

  it("names the sandbox's own working directory in read-only advice (host mode)", async () => {
    const sandbox = new MemorySandbox({ workdir: "/home/me/project" });
    const toolset = createToolset({
      tools: [throwing(new FileOperationError("EROFS", "read_only", "/usr/lib/x"))],
      allowed: ["boom"],
    });
    const result = await toolset.call("boom", { path: "x" }, context(sandbox));
    expect(textOf(result)).toMatch(/Write under \/home\/me\/project instead/);
  });

  it("refuses two tools with one name", () => {
    const tool = defineTool({
      name: "dup",
      description: "d",
      inputSchema: z.strictObject({}),
      execute: () => Promise.resolve(textResult("ok")),
    });
    expect(() => createToolset({ tools: [tool, tool], allowed: ["dup"] })).toThrow(/twice/);
  });

  it("passes validated, defaulted input and a child logger to the tool", async () => {
    let seen: unknown;
    const tool = defineTool({
      name: "echo",
      description: "echo",
      inputSchema: z.strictObject({ n: z.number().default(7) }),
      execute: (input, ctx) => {
        seen = { input, hasSession: ctx.session !== undefined, id: ctx.toolCallId };
        return Promise.resolve(textResult("ok"));
      },
    });
    const toolset = createToolset({ tools: [tool], allowed: ["echo"] });
    await toolset.call("echo", {}, context());
    expect(seen).toEqual({ input: { n: 7 }, hasSession: true, id: "t1" });
  });
});
