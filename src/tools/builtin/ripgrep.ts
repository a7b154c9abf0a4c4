import type { ExecResult, Sandbox } from "../../sandbox/index.js";
import { shellCommand } from "../../common/index.js";

/** Exit code when `rg` is not installed (the shell's "command not found"). */
export const RG_MISSING = 127;

/**
 * Runs ripgrep with `args` (each quoted) and keeps the first `maxLines` output lines. Exit codes:
 * 0 results, 1 none, 2 rg error, 141 output cut at `maxLines` (rg got SIGPIPE), 127 no rg.
 */
export async function runRipgrep(options: {
  sandbox: Sandbox;
  args: readonly string[];
  cwd: string;
  maxLines: number;
  /** Output records end with NUL instead of newline (`rg --files --null`). */
  nulRecords?: boolean | undefined;
  signal: AbortSignal;
}): Promise<ExecResult> {
  const head = options.nulRecords ? "head -z -n" : "head -n";
  const command = [
    "command -v rg >/dev/null 2>&1 || exit 127",
    "set -o pipefail",
    `${shellCommand(["rg", ...options.args])} | ${head} ${options.maxLines}`,
  ].join("; ");
  return options.sandbox.exec(command, {
    signal: options.signal,
    cwd: options.cwd,
    timeoutMs: 60_000,
    maxOutputBytes: 4 * 1024 * 1024,
  });
}
