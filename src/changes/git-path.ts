/**
 * Path names as git writes them in a patch. The text here is the patch's bytes read as latin1
 * (one char per byte), so a name in any encoding survives intact until it is shown.
 */

const escapes: Record<string, number> = {
  a: 7,
  b: 8,
  t: 9,
  n: 10,
  v: 11,
  f: 12,
  r: 13,
  '"': 34,
  "\\": 92,
};

/**
 * Reads one C-style quoted name starting at `start` (a `"`), as git's quote.c writes it:
 * `\a \b \t \n \v \f \r \" \\` and three-digit octal bytes. Undefined when it is not well formed.
 */
export function readQuoted(text: string, start: number): { name: string; end: number } | undefined {
  if (text[start] !== '"') return undefined;
  let name = "";
  for (let i = start + 1; i < text.length; i += 1) {
    const char = text[i] ?? "";
    if (char === '"') return { name, end: i + 1 };
    if (char !== "\\") {
      name += char;
      continue;
    }
    const octal = /^[0-3][0-7]{2}/.exec(text.slice(i + 1, i + 4))?.[0];
    if (octal !== undefined) {
      // No file name holds a NUL byte.
      if (octal === "000") return undefined;
      name += String.fromCharCode(parseInt(octal, 8));
      i += 3;
      continue;
    }
    const code = escapes[text[i + 1] ?? ""];
    if (code === undefined) return undefined;
    name += String.fromCharCode(code);
    i += 1;
  }
  return undefined;
}

/**
 * A whole field that is one name: quoted (and then nothing after it) or taken as it is. Git quotes
 * every name with a control character, so an unquoted one holding one is not git's.
 */
export function readName(field: string): string | undefined {
  // eslint-disable-next-line no-control-regex
  if (!field.startsWith('"')) return /[\x00-\x1f\x7f]/.test(field) ? undefined : field;
  const quoted = readQuoted(field, 0);
  return quoted && quoted.end === field.length ? quoted.name : undefined;
}

/**
 * Every way the rest of a `diff --git ` line splits into two names. Unquoted names may hold
 * spaces, so `a/x b/y b/z` splits two ways; the headers that follow decide which one is meant.
 */
export function headerNameSplits(rest: string): Array<[string, string]> {
  const splits: Array<[string, string]> = [];
  if (rest.startsWith('"')) {
    const first = readQuoted(rest, 0);
    if (!first || rest[first.end] !== " ") return [];
    const second = readName(rest.slice(first.end + 1));
    return second === undefined ? [] : [[first.name, second]];
  }
  for (let at = rest.indexOf(" "); at !== -1; at = rest.indexOf(" ", at + 1)) {
    const second = readName(rest.slice(at + 1));
    if (second !== undefined) splits.push([rest.slice(0, at), second]);
  }
  return splits;
}

/** A name in the patch's bytes as text for people and checks (UTF-8, invalid bytes as U+FFFD). */
export function displayName(latin1: string): string {
  return Buffer.from(latin1, "latin1").toString("utf8");
}
