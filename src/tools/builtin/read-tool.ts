import { z } from "zod";
import { defineTool, errorResult, textResult, type ToolResult } from "../tool-definition.js";
import { resolveToolPath, sessionStateFor, stampOf } from "../session-state.js";
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
    const info = await sandbox.stat(path, { signal });
    if (!info) return errorResult(`${path} does not exist. Use ls or find to see what exists.`);
    if (info.type === "directory") {
      return errorResult(`${path} is a directory, not a file. Use ls to list it.`);
    }
    if (info.size > limits.readMaxBytes) {
      return errorResult(
        `${path} is ${info.size} bytes, more than read loads (${limits.readMaxBytes}). ` +
          `Use grep to find what you need, or exec with \`sed -n '100,200p'\`, head or tail to read part of it.`,
      );
    }
    const bytes = await sandbox.readFile(path, { signal, maxBytes: limits.readMaxBytes });
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
  const limit = options.limit ?? limits.readLines;
  const width = String(Math.min(total, start + limit - 1)).length;
  const out: string[] = [];
  let chars = 0;
  let line = start;
  let cutLines = 0;
  for (; line <= total && line < start + limit; line++) {
    let content = (lines[line - 1] ?? "").replace(/\r$/, "");
    if (content.length > limits.readLineChars) {
      content = `${content.slice(0, limits.readLineChars)} [… line cut: ${content.length} characters]`;
      cutLines++;
    }
    const rendered = `${String(line).padStart(width)}\t${content}`;
    if (chars + rendered.length > limits.outputChars && out.length > 0) break;
    out.push(rendered);
    chars += rendered.length + 1;
  }
  const last = line - 1;
  const notes: string[] = [];
  if (last < total) {
    notes.push(`[Showing lines ${start}-${last} of ${total}. Continue with offset=${last + 1}.]`);
  } else if (start > 1) {
    notes.push(`[Showing lines ${start}-${last} of ${total}; end of file.]`);
  }
  if (cutLines > 0) {
    notes.push(`[${cutLines} long line(s) were cut; use grep or exec to see them whole.]`);
  }
  return [...out, ...notes].join("\n");
}
