import { toModelToolSpec } from "./toolset.js";
import type { ToolDefinition } from "./tool-definition.js";

interface PropertySchema {
  type?: unknown;
  enum?: unknown;
  description?: unknown;
}

/** `string`, `integer`, `"list" | "poll"`: what a field takes, as a scripted model's author reads it. */
function typeOf(property: PropertySchema): string {
  if (Array.isArray(property.enum)) return property.enum.map((v) => JSON.stringify(v)).join(" | ");
  return typeof property.type === "string" ? property.type : "value";
}

/**
 * Every tool with its input fields — name, type, whether required, what it means — printed from
 * the same schemas the model is given and calls are checked against, so the reference cannot
 * drift from what the tools accept (`cordon help tools`).
 */
export function describeTools(tools: readonly ToolDefinition[]): string {
  return tools.map(describeTool).join("\n");
}

function describeTool(tool: ToolDefinition): string {
  const schema = toModelToolSpec(tool).inputSchema;
  const properties = (schema["properties"] ?? {}) as Record<string, PropertySchema>;
  const required = new Set(
    Array.isArray(schema["required"]) ? (schema["required"] as string[]) : [],
  );
  const fields = Object.entries(properties).map(([name, property]) => ({
    name: required.has(name) ? name : `${name}?`,
    type: typeOf(property),
    description: typeof property.description === "string" ? property.description : "",
  }));
  const nameWidth = Math.max(0, ...fields.map((field) => field.name.length)) + 2;
  const typeWidth = Math.max(0, ...fields.map((field) => field.type.length)) + 2;
  const lines = fields.map((field) =>
    `    ${field.name.padEnd(nameWidth)}${field.type.padEnd(typeWidth)}${field.description}`.trimEnd(),
  );
  const summary = tool.description.split("\n")[0] ?? "";
  return (
    [`${tool.name} — ${summary}`, ...(lines.length ? lines : ["    (no input)"])].join("\n") + "\n"
  );
}
