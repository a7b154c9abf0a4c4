import type { RunPlan } from "../../policy/index.js";

/** The message a model gets when it calls a tool the plan does not allow. */
export function refusalFor(plan: RunPlan, tool: string): string {
  const decision = plan.tools.decisions.find((entry) => entry.tool === tool && !entry.allowed);
  const because = decision?.reason ? `: ${decision.reason}` : "";
  const key = decision?.configKey ? ` (set by ${decision.configKey})` : "";
  return `The tool "${tool}" is not allowed in this run by policy${because}${key}. Use one of the tools you were given.`;
}
