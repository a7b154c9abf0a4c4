import { createHash } from "node:crypto";

/**
 * JSON with object keys sorted at every level (array order kept), so equal settings written in a
 * different key order hash the same while a reordered list — which Docker honours — does not.
 * `undefined` members are dropped like JSON.stringify does.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v ?? null)).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** sha256 of the canonical JSON, as hex, cut to `length` characters. */
export function hashOf(value: unknown, length = 16): string {
  return createHash("sha256").update(canonicalJson(value)).digest("hex").slice(0, length);
}
