import { createSilentLogger } from "../../common/index.js";
import type { Sandbox } from "../../sandbox/index.js";
import { builtinTools, type BuiltinToolsOptions } from "../builtin/index.js";
import type { ToolResult } from "../tool-definition.js";
import { createToolset, type Toolset } from "../toolset.js";

/** A toolset with every built-in tool allowed, and a `run` that returns the result's text. */
export function toolHarness(
  sandbox: Sandbox,
  options: BuiltinToolsOptions = {},
): {
  toolset: Toolset;
  call: (name: string, input: unknown, signal?: AbortSignal) => Promise<ToolResult>;
  text: (result: ToolResult) => string;
} {
  const tools = builtinTools(options);
  const toolset = createToolset({ tools, allowed: tools.map((tool) => tool.name) });
  let calls = 0;
  return {
    toolset,
    call: (name, input, signal) =>
      toolset.call(name, input, {
        sandbox,
        signal: signal ?? new AbortController().signal,
        logger: createSilentLogger(),
        toolCallId: `call-${++calls}`,
      }),
    text: (result) =>
      result.content
        .map((part) => (part.type === "text" ? part.text : `[image ${part.mediaType}]`))
        .join("\n"),
  };
}
