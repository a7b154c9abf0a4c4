import { posix } from "node:path";
import { z } from "zod";
import { withPathLock } from "../path-lock.js";
import { createUnifiedDiff } from "../patch/index.js";
import { resolveToolPath } from "../session-state.js";
import { countOf, decodeText, lineOfOffset, normalizeText, restoreText } from "../text-format.js";
import {
  defineTool,
  errorResult,
  textResult,
  type ToolDefinition,
  type ToolResult,
} from "../tool-definition.js";
import { truncateMiddle } from "../truncate.js";
import { limits } from "./limits.js";
import { recordWritten, staleReadRefusal } from "./stale-check.js";

const inputSchema = z.strictObject({
  path: z.string().min(1).describe("File to edit: relative to the working directory, or absolute."),
  old_text: z
    .string()
    .min(1)
    .describe(
      "Exact text to replace, including whitespace and indentation; must occur once unless replace_all.",
    ),
  new_text: z.string().describe("The replacement text."),
  replace_all: z
    .boolean()
    .optional()
    .describe("Replace every occurrence instead of requiring exactly one. Default false."),
});

export interface EditToolOptions {
  /** Refuse to edit a file that changed since this session last read it. Default true. */
  refuseStale?: boolean | undefined;
}

const DIFF_CHARS = 4000;

export function createEditTool(options: EditToolOptions = {}): ToolDefinition {
  const refuseStale = options.refuseStale ?? true;
  return defineTool({
    name: "edit",
    description: [
      "Replace exact text in a file. old_text must match the file exactly (whitespace and indentation included) and occur exactly once, unless replace_all is true.",
      "Include enough surrounding lines in old_text to make it unique. On zero or several matches nothing changes and the result says how many and where.",
      "Line endings (CRLF), a BOM and the final newline of the file are kept; write old_text/new_text with plain \\n.",
      "Returns a small diff of the change. Read the file first; an edit of a file that changed since you read it is refused.",
    ].join("\n"),
    inputSchema,
    async execute(input, context): Promise<ToolResult> {
      const { sandbox, signal } = context;
      const path = resolveToolPath(sandbox, input.path);
      if (input.old_text === input.new_text) {
        return errorResult("old_text and new_text are identical; there is nothing to change.");
      }
      return withPathLock({ sandboxId: sandbox.id, path }, async () => {
        const info = await sandbox.files.stat(path, { signal });
        if (!info) {
          return errorResult(`${path} does not exist. To create a file use write.`);
        }
        if (info.type === "directory") return errorResult(`${path} is a directory, not a file.`);
        if (info.size > limits.editMaxBytes) {
          return errorResult(
            `${path} is ${info.size} bytes, more than edit loads (${limits.editMaxBytes}). Use exec (e.g. sed) for a file this large.`,
          );
        }
        const bytes = await sandbox.files.readFile(path, { signal, maxBytes: limits.editMaxBytes });
        if (refuseStale) {
          const refusal = staleReadRefusal(context, path, bytes);
          if (refusal) return errorResult(refusal);
        }
        const text = decodeText(bytes);
        if (text === undefined) {
          return errorResult(`${path} is a binary file; edit only changes text files.`);
        }
        const { body, layout } = normalizeText(text);
        let oldText = input.old_text.replaceAll("\r\n", "\n");
        let newText = input.new_text.replaceAll("\r\n", "\n");
        let count = countOf(body, oldText);
        if (count === 0 && body.includes("\r\n") && oldText.includes("\n")) {
          // A file with mixed line endings keeps its CRLFs in the body; try them.
          const crlf = oldText.replaceAll("\n", "\r\n");
          const crlfCount = countOf(body, crlf);
          if (crlfCount > 0) {
            oldText = crlf;
            newText = newText.replaceAll("\n", "\r\n");
            count = crlfCount;
          }
        }
        if (count === 0) return errorResult(describeNoMatch(path, body, oldText));
        if (count > 1 && !input.replace_all) {
          const lines = matchLines(body, oldText);
          return errorResult(
            `old_text occurs ${count} times in ${path} (at lines ${formatList(lines)}); nothing was changed. ` +
              "Add surrounding lines to old_text so it matches exactly one place, or set replace_all: true to change all of them.",
          );
        }
        const newBody = input.replace_all
          ? body.split(oldText).join(newText)
          : replaceOnce(body, oldText, newText);
        const updated = restoreText(newBody, layout);
        const out = new TextEncoder().encode(updated);
        await sandbox.files.writeFile(path, out, { signal });
        await recordWritten(context, sandbox, path, out);
        const relative = posix.relative(sandbox.workdir, path);
        const name = relative.startsWith("..") || relative === "" ? path : relative;
        const diff = createUnifiedDiff({
          oldText: body,
          newText: newBody,
          oldPath: name,
          newPath: name,
        });
        const shown = truncateMiddle(diff, DIFF_CHARS).text;
        const what = count === 1 ? "1 replacement" : `${count} replacements`;
        return textResult(`Edited ${path} (${what}).\n${shown}`);
      });
    },
  });
}

function replaceOnce(body: string, oldText: string, newText: string): string {
  const index = body.indexOf(oldText);
  return body.slice(0, index) + newText + body.slice(index + oldText.length);
}

function matchLines(body: string, needle: string): number[] {
  const lines: number[] = [];
  for (let i = body.indexOf(needle); i !== -1; i = body.indexOf(needle, i + needle.length)) {
    lines.push(lineOfOffset(body, i));
  }
  return lines;
}

function formatList(values: number[]): string {
  const shown = values.slice(0, 10).join(", ");
  return values.length > 10 ? `${shown}, … (${values.length - 10} more)` : shown;
}

/** Zero matches: say so, and point at a near miss (whitespace or case) when there is one. */
function describeNoMatch(path: string, body: string, oldText: string): string {
  const base = `old_text was not found in ${path}; nothing was changed.`;
  const want = oldText.split("\n").map((line) => line.trim());
  const lines = body.split("\n");
  const candidates: number[] = [];
  for (let i = 0; i + want.length <= lines.length; i++) {
    if (want.every((line, k) => (lines[i + k] ?? "").trim() === line)) candidates.push(i + 1);
  }
  if (candidates.length > 0) {
    return `${base} Lines ${formatList(candidates)} match except for whitespace/indentation; copy old_text exactly from the file (read it again), including indentation.`;
  }
  const lower = body.toLowerCase().indexOf(oldText.toLowerCase());
  if (lower !== -1) {
    return `${base} A match that differs only in letter case is at line ${lineOfOffset(body, lower)}; copy old_text exactly.`;
  }
  const first = want.find((line) => line !== "");
  const firstAt = first === undefined ? -1 : lines.findIndex((line) => line.trim() === first);
  if (firstAt !== -1) {
    return `${base} Its first line appears at line ${firstAt + 1}, but the following lines differ. Read the file again and copy old_text exactly.`;
  }
  return `${base} Read the file again and copy old_text exactly as it appears.`;
}
