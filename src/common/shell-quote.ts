/**
 * Quoting for commands run with `bash -lc`. Every argument becomes one single-quoted word, so no
 * character in it (spaces, quotes, `$`, backticks, globs, newlines, unicode) means anything to
 * the shell. A leading dash is not the shell's business: callers pass `--` before operands.
 */

/** `value` as one bash word that expands to exactly `value`. */
export function quoteShellArg(value: string): string {
  if (value.includes("\u0000")) {
    // A NUL cannot be part of any argv entry; refusing beats silently cutting the argument.
    throw new TypeError("a shell argument cannot contain a NUL character");
  }
  if (value !== "" && /^[A-Za-z0-9_@%+:,./-]+$/.test(value)) return value;
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/** Joins argv into one command line, each argument quoted. */
export function shellCommand(argv: readonly string[]): string {
  return argv.map(quoteShellArg).join(" ");
}
