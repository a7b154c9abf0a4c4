import { styleText } from "node:util";

/** A style `node:util`'s styleText knows: "red", "bold", ["green", "bold"]. */
export type TextStyle = Parameters<typeof styleText>[0];

/** Styles text for one output stream, or leaves it plain when that stream gets no colour. */
export type Paint = (style: TextStyle, text: string) => string;

/** What decides colour for a stream: whether it is a terminal, and whether that terminal has any. */
export interface ColorTarget {
  isTTY?: boolean | undefined;
  hasColors?: (() => boolean) | undefined;
}

/**
 * Whether a stream gets colour, as the tools people know decide it: `NO_COLOR` (present and not
 * empty) turns it off, `FORCE_COLOR` turns it on (off when "0" or "false") even into a pipe,
 * else a terminal that reports colours gets them and anything else (a pipe, a file) does not.
 */
export function colorEnabled(target: ColorTarget, env: NodeJS.ProcessEnv): boolean {
  if (env["NO_COLOR"]) return false;
  const force = env["FORCE_COLOR"];
  if (force !== undefined && force !== "") return force !== "0" && force !== "false";
  return target.isTTY === true && (target.hasColors?.() ?? false);
}

export const plain: Paint = (_style, text) => text;

/** A `Paint` for a stream whose colour was decided by `colorEnabled`. */
export function painter(enabled: boolean): Paint {
  if (!enabled) return plain;
  // Decided already: styleText must not judge process.stdout again (it may be a pipe while
  // the text goes to a terminal on stderr).
  return (style, text) => styleText(style, text, { validateStream: false });
}

/**
 * A git patch coloured as `git diff` colours it: file headers bold, hunk lines cyan, added lines
 * green, removed lines red. The header/hunk state matters: inside a hunk, `--- x` is a removed
 * line, not a file header.
 */
export function paintPatch(patch: string, paint: Paint): string {
  if (paint === plain) return patch;
  let inHunk = false;
  return patch
    .split("\n")
    .map((line) => {
      if (line.startsWith("diff --git ")) inHunk = false;
      if (line.startsWith("@@")) {
        inHunk = true;
        return paint("cyan", line);
      }
      if (!inHunk) return line === "" ? line : paint("bold", line);
      if (line.startsWith("+")) return paint("green", line);
      if (line.startsWith("-")) return paint("red", line);
      return line;
    })
    .join("\n");
}
