import { z } from "zod";
import {
  defineTool,
  errorResult,
  textResult,
  type ToolContext,
  type ToolResult,
} from "../tool-definition.js";
import { resolveToolPath, sessionStateFor, stampOf } from "../session-state.js";
import { shellCommand, quoteShellArg } from "../../common/index.js";
import { decodeText } from "../text-format.js";
import { limits } from "./limits.js";

const inputSchema = z.strictObject({
  path: z.string().min(1).describe("File to read: relative to the working directory, or absolute."),
  offset: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe("1-based line number to start at. Default 1."),
  limit: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe(`Maximum number of lines to return. Default ${limits.readLines}.`),
});

/** Magic numbers of the image formats the model API accepts. */
function imageMediaType(bytes: Uint8Array): string | undefined {
  const starts = (...sig: number[]): boolean => sig.every((b, i) => bytes[i] === b);
  if (starts(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return "image/png";
  if (starts(0xff, 0xd8, 0xff)) return "image/jpeg";
  if (starts(0x47, 0x49, 0x46, 0x38)) return "image/gif";
  if (starts(0x52, 0x49, 0x46, 0x46) && bytes[8] === 0x57 && bytes[9] === 0x45) return "image/webp";
  return undefined;
}

export const readTool = defineTool({
  name: "read",
  description: [
    "Read a file. Text comes back with line numbers (`  12\\tcontent`); the numbers are not part of the file.",
    `Returns up to ${limits.readLines} lines from \`offset\` (1-based); for longer files the result says how to page on.`,
    `Lines longer than ${limits.readLineChars} characters are cut in the output.`,
    "PNG, JPEG, GIF and WebP images come back as images. Other binary files are refused; inspect them with exec (e.g. `file`, `xxd | head`).",
    "Use ls/find to discover files and grep to search inside many files.",
  ].join("\n"),
  inputSchema,
  async execute(input, context): Promise<ToolResult> {
    const { sandbox, signal } = context;
    const path = resolveToolPath(sandbox, input.path);
    const info = await sandbox.files.stat(path, { signal });
    if (!info) return errorResult(`${path} does not exist. Use ls or find to see what exists.`);
    if (info.type === "directory") {
      return errorResult(`${path} is a directory, not a file. Use ls to list it.`);
    }
    if (info.size > limits.readMaxBytes) {
      return readLargeFile({
        context,
        path,
        size: info.size,
        offset: input.offset,
        limit: input.limit,
      });
    }
    const bytes = await sandbox.files.readFile(path, { signal, maxBytes: limits.readMaxBytes });
    const mediaType = imageMediaType(bytes);
    if (mediaType) {
      if (bytes.byteLength > limits.imageMaxBytes) {
        return errorResult(
          `${path} is a ${mediaType} of ${bytes.byteLength} bytes, over the ${limits.imageMaxBytes}-byte image limit. Scale it down first (exec).`,
        );
      }
      return {
        content: [
          { type: "text", text: `${path} (${mediaType}, ${bytes.byteLength} bytes):` },
          { type: "image", mediaType, dataBase64: Buffer.from(bytes).toString("base64") },
        ],
        isError: false,
      };
    }
    const text = decodeText(bytes);
    if (text === undefined) {
      return errorResult(
        `${path} is a binary file (${bytes.byteLength} bytes), not text; read does not show it. Inspect it with exec, e.g. \`file\` or \`xxd | head -50\`.`,
      );
    }
    sessionStateFor(context).recordRead(sandbox, path, stampOf(bytes, info.mtimeMs));
    return textResult(renderLines({ path, text, offset: input.offset, limit: input.limit }));
  },
});

function renderLines(options: {
  path: string;
  text: string;
  offset: number | undefined;
  limit: number | undefined;
}): string {
  const body = options.text.startsWith("\uFEFF") ? options.text.slice(1) : options.text;
  if (body === "") return `${options.path} is empty (0 lines).`;
  const lines = body.split("\n");
  if (lines.at(-1) === "") lines.pop();
  const total = lines.length;
  const start = options.offset ?? 1;
  if (start > total) {
    return `${options.path} has ${total} lines; offset ${start} is past the end. Use an offset from 1 to ${total}.`;
  }
  const window = formatWindow({
    lines: lines.slice(start - 1),
    first: start,
    limit: options.limit ?? limits.readLines,
  });
  const notes: string[] = [];
  if (window.last < total) {
    notes.push(
      `[Showing lines ${start}-${window.last} of ${total}. Continue with offset=${window.last + 1}.]`,
    );
  } else if (start > 1) {
    notes.push(`[Showing lines ${start}-${window.last} of ${total}; end of file.]`);
  }
  notes.push(...window.notes);
  return [...window.out, ...notes].join("\n");
}

/**
 * Numbers `lines` (the first one is line `first`), at most `limit` of them and within the output
 * budget; long lines are cut. `last` is the number of the last line shown.
 */
function formatWindow(options: { lines: readonly string[]; first: number; limit: number }): {
  out: string[];
  last: number;
  notes: string[];
} {
  const { lines, first, limit } = options;
  const count = Math.min(lines.length, limit);
  const width = String(first + count - 1).length;
  const out: string[] = [];
  let chars = 0;
  let cutLines = 0;
  for (let k = 0; k < count; k++) {
    let content = (lines[k] ?? "").replace(/\r$/, "");
    if (content.length > limits.readLineChars) {
      content = `${content.slice(0, limits.readLineChars)} [… line cut: ${content.length} characters]`;
      cutLines++;
    }
    const rendered = `${String(first + k).padStart(width)}\t${content}`;
    if (chars + rendered.length > limits.outputChars && out.length > 0) break;
    out.push(rendered);
    chars += rendered.length + 1;
  }
  const notes =
    cutLines > 0
      ? [`[${cutLines} long line(s) were cut; use grep or exec to see them whole.]`]
      : [];
  return { out, last: first + out.length - 1, notes };
}

/**
 * A file too large to load (a saved exec log, a data dump): the requested lines are cut out
 * inside the sandbox with tail/head, so only they travel. No stale-read stamp: the whole file
 * was never seen.
 */
async function readLargeFile(options: {
  context: ToolContext;
  path: string;
  size: number;
  offset: number | undefined;
  limit: number | undefined;
}): Promise<ToolResult> {
  const { context, path, size } = options;
  const start = options.offset ?? 1;
  const limit = options.limit ?? limits.readLines;
  const quoted = quoteShellArg(path);
  const command = [
    `wc -l < ${quoted}`,
    `${shellCommand(["tail", "-n", `+${start}`, "--", path])} | head -n ${limit} | head -c ${limits.outputChars * 4}`,
  ].join(" && ");
  const result = await context.sandbox.exec(command, {
    signal: context.signal,
    timeoutMs: 60_000,
    maxOutputBytes: limits.outputChars * 8,
  });
  if (result.exitCode !== 0 && result.exitCode !== 141) {
    return errorResult(
      `${path} is ${size} bytes, too large to load whole, and reading a range of it failed: ${result.stderr.trim() || `exit code ${String(result.exitCode)}`}. Use grep, or exec with sed -n.`,
    );
  }
  if (result.stdout.includes("\u0000")) {
    return errorResult(
      `${path} is a binary file (${size} bytes); inspect it with exec, e.g. xxd | head.`,
    );
  }
  const newline = result.stdout.indexOf("\n");
  const counted = Number(result.stdout.slice(0, newline).trim());
  const lines = result.stdout.slice(newline + 1).split("\n");
  if (lines.at(-1) === "") lines.pop();
  if (lines.length === 0) {
    return errorResult(`${path} has ${counted} lines; offset ${start} is past the end.`);
  }
  // wc counts newlines; a last line without one is still a line.
  const total = Math.max(counted, start + lines.length - 1);
  const window = formatWindow({ lines, first: start, limit });
  const next = window.last < total ? `Continue with offset=${window.last + 1}.` : "End of file.";
  const note = `[${path} is ${size} bytes, read as a range: lines ${start}-${window.last} of ${total}. ${next}]`;
  return textResult([...window.out, note, ...window.notes].join("\n"));
}
