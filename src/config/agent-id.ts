/** The longest agent id; it goes into session keys, file names and container names. */
export const agentIdMaxLength = 64;

/**
 * The canonical form of an agent id, as OpenClaw has it: trimmed, lowercase, every run of
 * characters other than letters, digits, `_` and `-` made one `-`, no `-` or `_` at either end,
 * at most 64 characters. `"Ops Team"` → `"ops-team"`. Empty when nothing usable is left.
 */
export function normalizeAgentId(written: string): string {
  return written
    .trim()
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, "-")
    .replace(/^[-_]+/, "")
    .slice(0, agentIdMaxLength)
    .replace(/[-_]+$/, "");
}
