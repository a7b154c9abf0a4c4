import { createHash } from "node:crypto";

import { ConfigError } from "../../common/index.js";

/**
 * One Anthropic API key of the user's. The secret never leaves this object except to the SDK:
 * logs, events, messages and the shared state file name the key by `label` and `id` only.
 */
export interface ApiKey {
  /** Where the key came from, e.g. `ANTHROPIC_API_KEY_2` or `ANTHROPIC_API_KEYS#2`. */
  readonly label: string;
  /** A short hash of the secret: stable across processes, useless for recovering the key. */
  readonly id: string;
  readonly secret: string;
}

/** The variable holding a comma-separated list of keys. */
export const apiKeyListVariable = "ANTHROPIC_API_KEYS";

/** First 12 hex digits of SHA-256: 48 bits tell keys apart, and say nothing about a key. */
export function keyId(secret: string): string {
  return createHash("sha256").update(secret).digest("hex").slice(0, 12);
}

/** How a key is named to the user: its variable and its short hash. */
export function describeKey(key: ApiKey): string {
  return `${key.label} (${key.id})`;
}

/**
 * The API keys a run may use, in the user's order, duplicates dropped:
 * `model.apiKeyEnv` (names of variables, one key each) when the config sets it, else
 * ANTHROPIC_API_KEYS (`k1,k2`), else ANTHROPIC_API_KEY. Empty when none is set (an auth token
 * may still be). A named variable that is unset is an error only when no named one is set.
 */
export function apiKeysFromEnv(
  env: Readonly<Record<string, string | undefined>>,
  apiKeyEnv?: readonly string[],
): ApiKey[] {
  const keys: ApiKey[] = [];
  const add = (label: string, secret: string): void => {
    const trimmed = secret.trim();
    if (trimmed === "") return;
    const id = keyId(trimmed);
    if (!keys.some((key) => key.id === id)) keys.push({ label, id, secret: trimmed });
  };
  if (apiKeyEnv && apiKeyEnv.length > 0) {
    for (const name of apiKeyEnv) add(name, env[name] ?? "");
    if (keys.length === 0) {
      throw new ConfigError(
        `model.apiKeyEnv names ${apiKeyEnv.join(", ")}, but none of ${apiKeyEnv.length === 1 ? "it is" : "them is"} set`,
        { fix: `export ${apiKeyEnv[0] ?? "ANTHROPIC_API_KEY"}=… (or change model.apiKeyEnv)` },
      );
    }
    return keys;
  }
  const list = env[apiKeyListVariable];
  if (list) {
    list.split(",").forEach((secret, index) => add(`${apiKeyListVariable}#${index + 1}`, secret));
    if (keys.length > 0) return keys;
  }
  add("ANTHROPIC_API_KEY", env["ANTHROPIC_API_KEY"] ?? "");
  return keys;
}
