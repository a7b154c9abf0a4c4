import { ConfigError } from "../../common/index.js";

const unitMs: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/**
 * Milliseconds from a duration like `30m`, `2h`, `7d`, `1h30m` or `90s` (units ms, s, m, h, d,
 * w). `flag` names the option in the error.
 */
export function parseDuration(text: string, flag: string): number {
  const trimmed = text.trim().toLowerCase();
  const part = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/gy;
  let total = 0;
  let consumed = 0;
  for (let match = part.exec(trimmed); match; match = part.exec(trimmed)) {
    total += Number(match[1]) * (unitMs[match[2] ?? ""] ?? Number.NaN);
    consumed = part.lastIndex;
  }
  if (trimmed === "" || consumed !== trimmed.length || !Number.isFinite(total)) {
    throw new ConfigError(`${flag} ${JSON.stringify(text)} is not a duration`, {
      fix: `give a number and a unit, e.g. ${flag} 30m, 2h or 7d (units: ms, s, m, h, d, w)`,
    });
  }
  return Math.round(total);
}
