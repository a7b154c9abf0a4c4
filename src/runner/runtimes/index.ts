export {
  ClaudeCodeRuntime,
  disallowedClaudeCodeTools,
  hostModelAccess,
  type ClaudeCodeRuntimeOptions,
  type HostModelAccess,
} from "./claude-code.js";
export { ClaudeCodeEvents } from "./claude-code-events.js";
export { CommandRuntime, type CommandRuntimeSpec } from "./command.js";
export { agentRuntimeOf } from "./agent-runtime-of.js";
