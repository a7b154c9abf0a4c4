import type { RunPlan } from "./plan-run.js";
import { builtinToolCatalog, resolveToolName, type ToolCatalog } from "./tool-catalog.js";

/**
 * Why a tool the model asked for may not run under this plan, or undefined when it may: the
 * second enforcement point of DESIGN.md §3 (the model can name any tool). The text names the
 * config key that blocks it, for an `is_error` tool result.
 */
export function toolRefusal(
  plan: RunPlan,
  requested: string,
  catalog: ToolCatalog = builtinToolCatalog,
): string | undefined {
  const tool = resolveToolName(catalog, requested);
  const allowed = plan.tools.allowed.join(", ");
  if (tool === undefined)
    return `unknown tool "${requested}"; the tools of this run are: ${allowed}`;
  if (plan.tools.allowed.includes(tool)) return undefined;
  const decision = plan.tools.decisions.find((d) => d.tool === tool);
  const why = decision
    ? `${decision.reason} (${decision.configKey})`
    : "not in this run's tool set";
  return `tool "${tool}" is not allowed for agent "${plan.agent.id}": ${why}; allowed tools: ${allowed}`;
}
