import type { PlannedRuntime } from "../../policy/index.js";
import type { AgentRuntime } from "../orchestrate/index.js";
import { ClaudeCodeRuntime, hostModelAccess } from "./claude-code.js";
import { CommandRuntime } from "./command.js";

/** The program the plan's runtime names; undefined for cordon's own loop. */
export function agentRuntimeOf(
  runtime: PlannedRuntime,
  env: NodeJS.ProcessEnv,
): AgentRuntime | undefined {
  switch (runtime.name) {
    case "cordon":
      return undefined;
    case "command":
      return new CommandRuntime(runtime);
    case "claude-code":
      return new ClaudeCodeRuntime({ access: hostModelAccess(env) });
  }
}
