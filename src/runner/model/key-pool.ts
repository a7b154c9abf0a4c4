import type { ApiKey } from "./api-keys.js";

/**
 * How the keys of a pool take turns, as pure functions of their recorded use (OpenClaw's auth
 * profile rotation, for API keys): the key used longest ago goes first, so load spreads round-robin
 * across keys and across processes; a key the API refused (429, 529, 401, 403, billing) cools down
 * for 10 s, then 60 s, then 300 s on each further refusal in a row, and goes last until it has.
 */

/** What is recorded about one key, by its `id`. Times are milliseconds since the epoch. */
export interface KeyUsage {
  /** When a request last went out with this key. */
  lastUsed?: number | undefined;
  /** Not offered before this time, unless every key is cooling down. */
  cooldownUntil?: number | undefined;
  /** Refusals in a row; a request that succeeds resets it. */
  failures?: number | undefined;
}

export type KeyUsages = Record<string, KeyUsage>;

/** The cooldown after the first, second and third (and any further) refusal in a row. */
export const cooldownStepsMs: readonly number[] = [10_000, 60_000, 300_000];
/** The longest a key ever cools down, whatever a `retry-after` or a state file says. */
export const maxCooldownMs = 300_000;

/**
 * The order to try keys in: those not cooling down, least recently used first (never used before
 * used, then the user's order); then those cooling down, the one ready soonest first.
 */
export function keyOrder(
  keys: readonly ApiKey[],
  usages: Readonly<KeyUsages>,
  now: number,
): { ready: ApiKey[]; cooling: ApiKey[] } {
  const indexed = keys.map((key, index) => ({ key, index, usage: usages[key.id] ?? {} }));
  const isCooling = (usage: KeyUsage): boolean => (usage.cooldownUntil ?? 0) > now;
  const ready = indexed
    .filter((entry) => !isCooling(entry.usage))
    .sort((a, b) => (a.usage.lastUsed ?? -1) - (b.usage.lastUsed ?? -1) || a.index - b.index)
    .map((entry) => entry.key);
  const cooling = indexed
    .filter((entry) => isCooling(entry.usage))
    .sort(
      (a, b) => (a.usage.cooldownUntil ?? 0) - (b.usage.cooldownUntil ?? 0) || a.index - b.index,
    )
    .map((entry) => entry.key);
  return { ready, cooling };
}

/**
 * The usage of a key the API just refused: one more failure, cooling down for the next step, or
 * for as long as the API asked (`retry-after`) when that is longer, never beyond `maxCooldownMs`.
 */
export function afterRefusal(usage: KeyUsage, now: number, retryAfterMs?: number): KeyUsage {
  const failures = Math.min((usage.failures ?? 0) + 1, cooldownStepsMs.length);
  const step = cooldownStepsMs[failures - 1] ?? maxCooldownMs;
  const wait = Math.min(Math.max(step, retryAfterMs ?? 0), maxCooldownMs);
  return { ...usage, failures, cooldownUntil: now + wait };
}

/** The usage of a key whose request went through: no cooldown, no failures. */
export function afterSuccess(usage: KeyUsage): KeyUsage {
  return { lastUsed: usage.lastUsed };
}
