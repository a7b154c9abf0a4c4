import { z } from "zod";
import { freezeDeep, messageOf } from "../common/index.js";
import { describeToolError } from "./tool-errors.js";
import {
  errorResult,
  type ModelToolSpec,
  type ToolContext,
  type ToolDefinition,
  type ToolResult,
} from "./tool-definition.js";
import { ToolSessionState } from "./session-state.js";

/** The tools one run may use, ready for the model and for dispatch. */
export interface Toolset {
  /** The allowed tools as offered to the model, in registration order. */
  specs: ModelToolSpec[];
  names: string[];
  /**
   * Whether a tool may run: undefined when it may, else the message for the model (an unknown
   * name gets the tools that exist; a registered tool the policy leaves out gets `refusal`'s
   * message). The one decision: `call`, the agent loop and `cordon tool` all ask it.
   */
  refusal(name: string): string | undefined;
  /**
   * Validates `rawInput` and runs the tool. Never throws for a tool failure: a bad input, a
   * refused or unknown tool and every error thrown by the tool become an `isError` result.
   */
  call(name: string, rawInput: unknown, context: ToolContext): Promise<ToolResult>;
}

export interface CreateToolsetOptions {
  tools: readonly ToolDefinition[];
  /** Names the policy allows (exact tool names, already resolved from groups/aliases). */
  allowed: readonly string[];
  /**
   * The message for a call to a tool that exists but is not allowed; the policy layer knows the
   * config key that blocks it. Default: a generic refusal.
   */
  refusal?: ((name: string) => string) | undefined;
}

export function createToolset(options: CreateToolsetOptions): Toolset {
  const byName = new Map<string, ToolDefinition>();
  for (const tool of options.tools) {
    if (byName.has(tool.name)) throw new Error(`tool "${tool.name}" is registered twice`);
    byName.set(tool.name, tool);
  }
  const allowed = new Set(options.allowed);
  const offered = options.tools.filter((tool) => allowed.has(tool.name));
  // Frozen: the same list goes with every model call of a run, so its size is estimated once.
  const specs = freezeDeep(offered.map(toModelToolSpec));
  const names = offered.map((tool) => tool.name);
  const session = new ToolSessionState();

  function refusal(name: string): string | undefined {
    if (!byName.has(name)) {
      return `There is no tool named "${name}". Available tools: ${names.join(", ") || "(none)"}.`;
    }
    if (!allowed.has(name)) {
      return options.refusal?.(name) ?? `The tool "${name}" is not allowed in this run by policy.`;
    }
    return undefined;
  }

  async function call(name: string, rawInput: unknown, context: ToolContext): Promise<ToolResult> {
    const refused = refusal(name);
    const tool = byName.get(name);
    if (refused !== undefined || !tool) return errorResult(refused ?? "");
    const parsed = tool.inputSchema.safeParse(rawInput);
    if (!parsed.success) return errorResult(describeInvalidInput(tool, parsed.error));
    if (context.signal.aborted) {
      return errorResult("The call was aborted before it started; nothing was run.");
    }
    const logger = context.logger.child({ tool: name, toolCallId: context.toolCallId });
    logger.debug("tool call starting");
    try {
      const result = await tool.execute(parsed.data, {
        ...context,
        logger,
        session: context.session ?? session,
      });
      logger.debug({ isError: result.isError }, "tool call finished");
      return result;
    } catch (error) {
      logger.debug({ err: messageOf(error) }, "tool call failed");
      return errorResult(describeToolError(error, { workdir: context.sandbox.workdir }));
    }
  }

  return { specs, names, refusal, call };
}

export function toModelToolSpec(tool: ToolDefinition): ModelToolSpec {
  const schema = z.toJSONSchema(tool.inputSchema, { io: "input", unrepresentable: "any" });
  // The model API takes a bare object schema; the $schema marker is noise to it.
  const { $schema: _ignored, ...inputSchema } = schema as Record<string, unknown>;
  return { name: tool.name, description: tool.description, inputSchema };
}

/** `path: message` per issue, and the fields the tool takes, so the model can fix its call. */
export function describeInvalidInput(tool: ToolDefinition, error: z.ZodError): string {
  const lines = error.issues.map((issue) => {
    const where = issue.path.length > 0 ? issue.path.map(String).join(".") : "(input)";
    return `- ${where}: ${issue.message}`;
  });
  return [
    `Invalid input for tool "${tool.name}"; nothing was run. Fix these and call again:`,
    ...lines,
    `Expected input: ${describeFields(tool)}`,
  ].join("\n");
}

function describeFields(tool: ToolDefinition): string {
  const schema = toModelToolSpec(tool).inputSchema;
  const properties = schema["properties"];
  if (typeof properties !== "object" || properties === null) return JSON.stringify(schema);
  const required = new Set(
    Array.isArray(schema["required"]) ? (schema["required"] as string[]) : [],
  );
  const fields = Object.entries(properties as Record<string, { type?: unknown }>).map(
    ([key, value]) => {
      const type = typeof value.type === "string" ? value.type : "value";
      return `${key}${required.has(key) ? "" : "?"}: ${type}`;
    },
  );
  return `{ ${fields.join(", ")} }`;
}
