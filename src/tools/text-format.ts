/**
 * How a text file is laid out (BOM, line endings, final newline), so edits can change its content
 * and keep everything else byte for byte.
 */

const BOM = "\uFEFF";

export interface TextLayout {
  bom: boolean;
  /** "\r\n" only when every line break in the file is CRLF; mixed files are edited as they are. */
  eol: "\n" | "\r\n";
  finalNewline: boolean;
}

/** Decodes UTF-8 strictly; undefined when the bytes are not text (NUL byte or invalid UTF-8). */
export function decodeText(bytes: Uint8Array): string | undefined {
  if (looksBinary(bytes)) return undefined;
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/** A NUL byte in the first 8 KiB: what git and grep use to call a file binary. */
export function looksBinary(bytes: Uint8Array): boolean {
  const head = bytes.subarray(0, 8192);
  return head.includes(0);
}

/** Splits decoded text into its layout and a body with LF line breaks and no BOM. */
export function normalizeText(text: string): { body: string; layout: TextLayout } {
  const bom = text.startsWith(BOM);
  let body = bom ? text.slice(1) : text;
  const lf = countOf(body, "\n");
  const crlf = countOf(body, "\r\n");
  const eol = lf > 0 && crlf === lf ? "\r\n" : "\n";
  if (eol === "\r\n") body = body.replaceAll("\r\n", "\n");
  const finalNewline = body.endsWith("\n");
  return { body, layout: { bom, eol, finalNewline } };
}

/**
 * Puts a body with LF breaks back into `layout`: BOM, line endings, and the final newline exactly
 * as the original had it (an empty body stays empty).
 */
export function restoreText(body: string, layout: TextLayout): string {
  let text = body;
  if (text !== "") {
    if (layout.finalNewline && !text.endsWith("\n")) text += "\n";
    if (!layout.finalNewline && text.endsWith("\n")) text = text.slice(0, -1);
  }
  if (layout.eol === "\r\n") text = text.replace(/\r?\n/g, "\r\n");
  return (layout.bom ? BOM : "") + text;
}

export function countOf(haystack: string, needle: string): number {
  if (needle === "") return 0;
  let count = 0;
  let index = haystack.indexOf(needle);
  while (index !== -1) {
    count++;
    index = haystack.indexOf(needle, index + needle.length);
  }
  return count;
}

/** 1-based line number of a character offset. */
export function lineOfOffset(text: string, offset: number): number {
  let line = 1;
  for (let i = 0; i < offset && i < text.length; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/** Shown to the model for names that would break a line-oriented listing. */
export function displayPath(path: string): string {
  // eslint-disable-next-line no-control-regex
  return /[\u0000-\u001f\u007f]|^\s|\s$/.test(path) ? JSON.stringify(path) : path;
}
