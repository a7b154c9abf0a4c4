import { z } from "zod";
import type { Sandbox } from "../../sandbox/index.js";
import { matchesGlob } from "../glob.js";
import { resolveToolPath } from "../session-state.js";
import { displayPath } from "../text-format.js";
import { defineTool, errorResult, textResult, type ToolResult } from "../tool-definition.js";
import { limits } from "./limits.js";
import { RG_MISSING, runRipgrep } from "./ripgrep.js";

const inputSchema = z.strictObject({
  pattern: z
    .string()
    .min(1)
    .describe(
      'Glob: "*.ts" matches at any depth, "src/**/*.test.ts" is relative to path, {a,b} and [abc] work.',
    ),
  path: z
    .string()
    .min(1)
    .optional()
    .describe("Directory to search; default the working directory."),
});

export const findTool = defineTool({
  name: "find",
  description: [
    "Find files by name with a glob, searching a directory recursively. Paths come back relative to the searched directory.",
    "Hidden files are included; .git and files ignored by .gitignore are skipped.",
    `At most ${limits.findResults} paths; the result says when there are more.`,
  ].join("\n"),
  inputSchema,
  async execute(input, context): Promise<ToolResult> {
    const { sandbox, signal } = context;
    const root = resolveToolPath(sandbox, input.path ?? ".");
    const info = await sandbox.files.stat(root, { signal });
    if (!info) return errorResult(`${root} does not exist.`);
    if (info.type !== "directory" && info.type !== "symlink") {
      return errorResult(`${root} is a file; find searches a directory.`);
    }
    const result = await runRipgrep({
      sandbox,
      cwd: root,
      signal,
      maxLines: limits.findResults + 1,
      nulRecords: true,
      // --null ends each path with NUL, so names containing newlines stay whole.
      args: ["--files", "--hidden", "--null", "--glob=!.git", `--glob=${input.pattern}`],
    });
    let paths: string[];
    let more: boolean;
    if (result.exitCode === RG_MISSING) {
      ({ paths, more } = await findByListing(sandbox, root, input.pattern, signal));
    } else if (result.exitCode === 2 && result.stdout === "") {
      return errorResult(`find failed: ${result.stderr.trim() || "ripgrep error"}`);
    } else {
      paths = result.stdout.split("\u0000").filter((path) => path !== "");
      more = paths.length > limits.findResults || result.exitCode === 141;
    }
    paths.sort();
    const shown = paths.slice(0, limits.findResults).map(displayPath);
    // rg exits 2 when some directory could not be read; what it could read is still the answer.
    const unreadable =
      result.exitCode === 2
        ? `[Some directories could not be searched: ${result.stderr.trim().split("\n")[0] ?? ""}]`
        : undefined;
    if (shown.length === 0) return textResult(`No files match ${input.pattern} under ${root}.`);
    if (more) {
      shown.push(
        `[… more matches not shown (stopped at ${limits.findResults}). Use a narrower pattern or path.]`,
      );
    }
    if (unreadable) shown.push(unreadable);
    return textResult(shown.join("\n"));
  },
});

/** Without ripgrep: walk with `list` and match in TypeScript (no .gitignore). */
async function findByListing(
  sandbox: Sandbox,
  root: string,
  pattern: string,
  signal: AbortSignal,
): Promise<{ paths: string[]; more: boolean }> {
  const listing = await sandbox.files.list(root, { signal, depth: 32, limit: 50_000 });
  const paths = listing.entries
    .filter((entry) => entry.type !== "directory")
    .map((entry) => entry.name)
    .filter((name) => !name.split("/").includes(".git") && matchesGlob(name, pattern));
  return { paths, more: paths.length > limits.findResults || listing.truncated };
}
