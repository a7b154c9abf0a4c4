/**
 * The agent's tools. They reach the world only through the `Sandbox` interface, so the same tool
 * is safe on the host (mode off) and in a container.
 */
export {
  errorResult,
  textResult,
  defineTool,
  type ModelToolSpec,
  type ToolContext,
  type ToolDefinition,
  type ToolResult,
  type ToolResultContent,
} from "./tool-definition.js";
export {
  createToolset,
  describeInvalidInput,
  toModelToolSpec,
  type CreateToolsetOptions,
  type Toolset,
} from "./toolset.js";
export {
  builtinTools,
  limits as toolLimits,
  type BuiltinToolsOptions,
  type EditToolOptions,
  type WriteToolOptions,
} from "./builtin/index.js";
export { describeToolError } from "./tool-errors.js";
export { describeTools } from "./tool-reference.js";
export { ToolSessionState, type FileStamp } from "./session-state.js";
export { quoteShellArg, shellCommand } from "../common/index.js";
export {
  applyHunks,
  createUnifiedDiff,
  parsePatch,
  PatchParseError,
  type FilePatch,
  type Hunk,
} from "./patch/index.js";
export * from "./sessions/index.js";
