import { randomUUID } from "node:crypto";

import type { Logger } from "../../common/index.js";
import type { RunPlan } from "../../policy/index.js";
import { describeInvalidInput, type ToolDefinition } from "../../tools/index.js";
import type { ToolResult } from "../../tools/index.js";
import { bindToolset, planToolset } from "./run-task.js";
import type { SandboxProvider } from "./sandbox-provider.js";

export interface CallToolOptions {
  tools: readonly ToolDefinition[];
  plan: RunPlan;
  sandboxes: SandboxProvider;
  logger: Logger;
  name: string;
  input: unknown;
  signal?: AbortSignal | undefined;
}

/**
 * One tool call outside any run (`cordon tool`), through exactly the policy and sandbox path an
 * agent's call takes: a tool the plan does not allow is refused with the key that blocks it.
 */
export async function callTool(
  options: CallToolOptions,
): Promise<ToolResult & { refused: boolean; invalidInput: boolean }> {
  const { tools, plan, name, input } = options;
  // Refused before any sandbox starts: a denied tool costs nothing and touches nothing.
  const refusal = planToolset(tools, plan).refusal(name);
  if (refusal !== undefined) {
    return {
      content: [{ type: "text", text: refusal }],
      isError: true,
      refused: true,
      invalidInput: false,
    };
  }
  // So is an input the tool would refuse: no sandbox is seeded only to say a field is missing.
  const tool = tools.find((candidate) => candidate.name === name);
  const checked = tool?.inputSchema.safeParse(input);
  if (tool && checked && !checked.success) {
    return {
      content: [{ type: "text", text: describeInvalidInput(tool, checked.error) }],
      isError: true,
      refused: false,
      invalidInput: true,
    };
  }
  const lease = await options.sandboxes.acquire(plan, { signal: options.signal });
  try {
    const toolset = bindToolset(tools, plan, lease.sandbox, options.logger);
    const result = await toolset.call(name, input, {
      signal: options.signal ?? new AbortController().signal,
      toolCallId: `cli_${randomUUID()}`,
    });
    return { ...result, refused: false, invalidInput: false };
  } finally {
    await lease.release();
  }
}
