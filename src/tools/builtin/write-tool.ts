import { z } from "zod";
import { withPathLock } from "../path-lock.js";
import { resolveToolPath } from "../session-state.js";
import {
  defineTool,
  errorResult,
  textResult,
  type ToolDefinition,
  type ToolResult,
} from "../tool-definition.js";
import { recordWritten, staleReadRefusal } from "./stale-check.js";

const inputSchema = z.strictObject({
  path: z
    .string()
    .min(1)
    .describe("File to write: relative to the working directory, or absolute."),
  content: z.string().describe("The complete new content of the file."),
});

export interface WriteToolOptions {
  /** Refuse to overwrite a file that changed since this session last read it. Default false. */
  refuseStale?: boolean | undefined;
}

export function createWriteTool(options: WriteToolOptions = {}): ToolDefinition {
  return defineTool({
    name: "write",
    description: [
      "Create a file or replace its whole content. Missing parent directories are created.",
      "The write is atomic: readers see the old or the new file, never a mix.",
      "To change part of an existing file prefer edit (or apply_patch for many changes).",
    ].join("\n"),
    inputSchema,
    async execute(input, context): Promise<ToolResult> {
      const { sandbox, signal } = context;
      const path = resolveToolPath(sandbox, input.path);
      const bytes = new TextEncoder().encode(input.content);
      return withPathLock({ sandboxId: sandbox.id, path }, async () => {
        const before = await sandbox.files.stat(path, { signal });
        if (before?.type === "directory") {
          return errorResult(`${path} is a directory; write needs a file path.`);
        }
        if (before && options.refuseStale) {
          const current = await sandbox.files.readFile(path, { signal });
          const refusal = staleReadRefusal(context, path, current);
          if (refusal) return errorResult(refusal);
        }
        await sandbox.files.writeFile(path, bytes, { signal, createParents: true });
        await recordWritten(context, sandbox, path, bytes);
        const verb = before ? "Overwrote" : "Created";
        return textResult(`${verb} ${path} (${bytes.byteLength} bytes).`);
      });
    },
  });
}
