import { createInterface } from "node:readline/promises";

import type { CliContext } from "./context.js";

/**
 * Asks a yes/no question on the terminal; undefined when there is none to ask on (stdin or
 * stderr is not a terminal: a script, CI), so the caller refuses rather than guesses. Only an
 * explicit "y" or "yes" counts as yes.
 */
export async function confirmOnTerminal(
  context: CliContext,
  question: string,
): Promise<boolean | undefined> {
  if (context.confirm) return context.confirm(question);
  if (!process.stdin.isTTY || !process.stderr.isTTY) return undefined;
  const prompt = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await prompt.question(`${question} [y/N] `);
    return /^\s*y(es)?\s*$/i.test(answer);
  } finally {
    prompt.close();
  }
}
