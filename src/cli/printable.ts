/**
 * Text from the agent, the repository or a container, made safe to print in a line of cordon's
 * own: control characters (terminal escapes, CR, backspace, newlines) are shown as `\uXXXX`, not
 * obeyed, so the text can neither rewrite the terminal nor pass for another line.
 */
export function printable(text: string): string {
  return text.replace(
    // eslint-disable-next-line no-control-regex
    /[\u0000-\u001f\u007f-\u009f]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/**
 * As `printable`, but line breaks and tabs are kept: for text that is shown as the lines it has
 * (an agent's answer replayed by `cordon logs`). Escapes, CR and backspace are still shown, not
 * obeyed, so no line can rewrite an earlier one or the terminal.
 */
export function printableLines(text: string): string {
  return text.replace(
    // eslint-disable-next-line no-control-regex
    /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}
