import { z } from "zod";
import type { DirEntry } from "../../sandbox/index.js";
import { resolveToolPath } from "../session-state.js";
import { displayPath } from "../text-format.js";
import { defineTool, errorResult, textResult, type ToolResult } from "../tool-definition.js";
import { limits } from "./limits.js";

const inputSchema = z.strictObject({
  path: z.string().min(1).optional().describe("Directory to list; default the working directory."),
  depth: z
    .number()
    .int()
    .min(1)
    .max(10)
    .optional()
    .describe("1 = direct children only (default); higher lists nested entries too."),
});

export const lsTool = defineTool({
  name: "ls",
  description: [
    "List a directory: one entry a line, directories end with /, symlinks with @, files show their size.",
    `At most ${limits.lsEntries} entries; the result says when there are more. Use find for name patterns.`,
  ].join("\n"),
  inputSchema,
  async execute(input, context): Promise<ToolResult> {
    const { sandbox, signal } = context;
    const path = resolveToolPath(sandbox, input.path ?? ".");
    const info = await sandbox.files.stat(path, { signal });
    if (!info) return errorResult(`${path} does not exist.`);
    if (info.type !== "directory" && info.type !== "symlink") {
      return textResult(`${path} is a file (${info.size} bytes), not a directory.`);
    }
    const listing = await sandbox.files.list(path, {
      signal,
      depth: input.depth ?? 1,
      limit: limits.lsEntries,
    });
    const entries = [...listing.entries].sort((a, b) =>
      a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
    );
    const lines = entries.map(describeEntry);
    if (lines.length === 0) lines.push("(empty directory)");
    const header = `${path}:`;
    if (listing.truncated || entries.length > limits.lsEntries) {
      lines.splice(limits.lsEntries);
      lines.push(
        `[… more entries not shown (stopped at ${limits.lsEntries}). List a subdirectory, lower depth, or use find with a pattern.]`,
      );
    }
    return textResult([header, ...lines].join("\n"));
  },
});

function describeEntry(entry: DirEntry): string {
  const name = displayPath(entry.name);
  switch (entry.type) {
    case "directory":
      return `${name}/`;
    case "symlink":
      return `${name}@`;
    case "file":
      return `${name}  (${formatSize(entry.size)})`;
    case "other":
      return `${name}  (special file)`;
  }
}

function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}
