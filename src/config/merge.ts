/**
 * Layering of config objects (DESIGN.md §4): maps merge key by key, everything else — lists
 * included — is replaced by the later layer. `undefined` in a later layer means "not set" and
 * leaves the earlier value; `null` is a value (in `tmpfs` and `env` maps it removes an entry).
 */

export type PlainObject = Record<string, unknown>;

export function isPlainObject(value: unknown): value is PlainObject {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** `later` layered over `earlier`; neither input is changed. */
export function mergeLayers(earlier: unknown, later: unknown): unknown {
  if (later === undefined) return earlier;
  if (!isPlainObject(earlier) || !isPlainObject(later)) return later;
  const merged: PlainObject = { ...earlier };
  for (const [key, value] of Object.entries(later)) {
    // A config file is untrusted text: never let it reach Object.prototype.
    if (key === "__proto__" || key === "constructor" || key === "prototype") continue;
    merged[key] = mergeLayers(earlier[key], value);
  }
  return merged;
}

/** All layers, first to last. */
export function mergeAll(layers: readonly unknown[]): unknown {
  return layers.reduce<unknown>((acc, layer) => mergeLayers(acc, layer), undefined);
}
