import { z } from "zod";
import { resolveToolPath } from "../session-state.js";
import { displayPath } from "../text-format.js";
import { defineTool, errorResult, textResult, type ToolResult } from "../tool-definition.js";
import { limits } from "./limits.js";
import { RG_MISSING, runRipgrep } from "./ripgrep.js";

const inputSchema = z.strictObject({
  pattern: z.string().min(1).describe("Regular expression (ripgrep / Rust syntax)."),
  path: z
    .string()
    .min(1)
    .optional()
    .describe("File or directory to search; default the working directory."),
  glob: z.string().min(1).optional().describe('Only search files matching this glob, e.g. "*.ts".'),
  ignore_case: z.boolean().optional().describe("Case-insensitive search. Default false."),
});

const MAX_COLUMNS = 300;

export const grepTool = defineTool({
  name: "grep",
  description: [
    "Search file contents with a regular expression (ripgrep). Returns `path:line:text` for each matching line.",
    "Hidden files are searched; .git, binary files and files ignored by .gitignore are skipped.",
    `At most ${limits.grepMatches} matching lines; lines over ${MAX_COLUMNS} characters are shortened.`,
  ].join("\n"),
  inputSchema,
  async execute(input, context): Promise<ToolResult> {
    const { sandbox, signal } = context;
    // ripgrep opens the path itself, outside the sandbox's file operations; the stat makes the
    // sandbox confine it first (a host sandbox refuses .., absolute paths and symlinks that leave
    // the workspace; ripgrep does not follow links while walking a directory).
    const target = resolveToolPath(sandbox, input.path ?? ".");
    if (!(await sandbox.files.stat(target, { signal }))) {
      return errorResult(`${target} does not exist. Use ls or find to see what exists.`);
    }
    const args = [
      "--line-number",
      "--no-heading",
      "--with-filename",
      "--color=never",
      "--hidden",
      "--null",
      `--max-columns=${MAX_COLUMNS}`,
      "--max-columns-preview",
      "--glob=!.git",
    ];
    if (input.ignore_case) args.push("--ignore-case");
    if (input.glob) args.push(`--glob=${input.glob}`);
    // -e keeps a pattern that starts with "-" a pattern; -- keeps a path that does a path.
    args.push("-e", input.pattern, "--", input.path ?? ".");
    const result = await runRipgrep({
      sandbox,
      cwd: sandbox.workdir,
      signal,
      maxLines: limits.grepMatches + 1,
      args,
    });
    if (result.exitCode === RG_MISSING) {
      return errorResult(
        "grep needs ripgrep (rg), which is not installed in this sandbox. Use exec with grep -rn instead.",
      );
    }
    if (result.exitCode === 1) {
      return textResult(`No matches for ${JSON.stringify(input.pattern)} in ${input.path ?? "."}.`);
    }
    if (result.exitCode === 2 && result.stdout === "") {
      return errorResult(`grep failed: ${result.stderr.trim() || "ripgrep error"}`);
    }
    const matches = parseMatches(result.stdout);
    const more = matches.length > limits.grepMatches || result.exitCode === 141;
    const lines = matches.slice(0, limits.grepMatches);
    if (more) {
      lines.push(
        `[… more matches not shown (stopped at ${limits.grepMatches}). Narrow the pattern, path or glob.]`,
      );
    }
    if (result.exitCode === 2) {
      lines.push(
        `[Some files could not be searched: ${result.stderr.trim().split("\n")[0] ?? ""}]`,
      );
    }
    return textResult(lines.join("\n"));
  },
});

/** rg --null output: `path\0line:text\n` per match; a path may itself contain newlines. */
function parseMatches(stdout: string): string[] {
  const out: string[] = [];
  let rest = stdout;
  while (rest !== "") {
    const nul = rest.indexOf("\u0000");
    if (nul === -1) break;
    const path = rest.slice(0, nul);
    const end = rest.indexOf("\n", nul + 1);
    if (end === -1) break; // a record cut by `head`
    out.push(`${displayPath(path)}:${rest.slice(nul + 1, end)}`);
    rest = rest.slice(end + 1);
  }
  return out;
}
