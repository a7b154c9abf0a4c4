import type { ToolDefinition } from "../tool-definition.js";
import { sessionTools } from "../sessions/index.js";
import { applyPatchTool } from "./apply-patch-tool.js";
import { createEditTool, type EditToolOptions } from "./edit-tool.js";
import { execTool } from "./exec-tool.js";
import { findTool } from "./find-tool.js";
import { grepTool } from "./grep-tool.js";
import { lsTool } from "./ls-tool.js";
import { processTool } from "./process-tool.js";
import { readTool } from "./read-tool.js";
import { createWriteTool, type WriteToolOptions } from "./write-tool.js";

export { limits } from "./limits.js";
export type { EditToolOptions, WriteToolOptions };

export interface BuiltinToolsOptions {
  edit?: EditToolOptions | undefined;
  write?: WriteToolOptions | undefined;
}

/** The built-in tools, in the order they are offered to the model. */
export function builtinTools(options: BuiltinToolsOptions = {}): ToolDefinition[] {
  return [
    execTool,
    processTool,
    readTool,
    createWriteTool(options.write),
    createEditTool(options.edit),
    applyPatchTool,
    lsTool,
    findTool,
    grepTool,
    ...sessionTools,
  ];
}
