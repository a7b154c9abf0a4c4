import type { z } from "zod";

interface SchemaDef {
  type: string;
  innerType?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  options?: z.ZodType[];
  in?: z.ZodType;
  valueType?: z.ZodType;
}

function defOf(schema: z.ZodType): SchemaDef {
  return (schema as unknown as { _zod: { def: SchemaDef } })._zod.def;
}

/** The object schemas a value at `path` may be checked against (several for a union). */
function objectsAt(schema: z.ZodType, path: readonly PropertyKey[]): SchemaDef[] {
  const def = defOf(schema);
  switch (def.type) {
    case "default":
    case "prefault":
    case "optional":
    case "nullable":
    case "readonly":
      return def.innerType ? objectsAt(def.innerType, path) : [];
    case "pipe":
      return def.in ? objectsAt(def.in, path) : [];
    case "union":
      return (def.options ?? []).flatMap((option) => objectsAt(option, path));
    case "array":
      return path.length && typeof path[0] === "number" && def.element
        ? objectsAt(def.element, path.slice(1))
        : [];
    case "record":
      return path.length && def.valueType ? objectsAt(def.valueType, path.slice(1)) : [];
    case "object": {
      if (path.length === 0) return [def];
      const next = def.shape?.[String(path[0])];
      return next ? objectsAt(next, path.slice(1)) : [];
    }
    default:
      return [];
  }
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0] ?? 0;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const current = row[j] ?? 0;
      const cost = a[i - 1]?.toLowerCase() === b[j - 1]?.toLowerCase() ? 0 : 1;
      row[j] = Math.min(current + 1, (row[j - 1] ?? 0) + 1, previous + cost);
      previous = current;
    }
  }
  return row[b.length] ?? Math.max(a.length, b.length);
}

/**
 * The known key closest to an unknown one at `path`, if one is close enough to be a typo; else
 * where a key of that name exists further down (`value`, what the user wrote under it, decides
 * between several).
 */
export function suggestKey(
  schema: z.ZodType,
  path: readonly PropertyKey[],
  unknown: string,
  value?: unknown,
): string | undefined {
  const known = objectsAt(schema, path).flatMap((def) => Object.keys(def.shape ?? {}));
  let best: { key: string; distance: number } | undefined;
  for (const key of known) {
    const distance = editDistance(unknown, key);
    if (!best || distance < best.distance) best = { key, distance };
  }
  const limit = Math.max(1, Math.floor(unknown.length / 3));
  if (best && best.distance <= limit) return best.key;
  return misplacedKey(schema, path, unknown, value);
}

/** How far below an unknown key a key of that name is looked for. */
const misplacedDepth = 2;

/**
 * A key that exists, by exactly that name, a level or two further down: `sandbox` at the root is
 * `agents.defaults.sandbox` (a config's first mistake, seen by hand). Objects only: arrays and
 * records need a name or index the user has to choose. Of several places (`tools.sandbox` too),
 * the one that knows most of the keys written under it; a tie names none rather than guess.
 */
function misplacedKey(
  schema: z.ZodType,
  path: readonly PropertyKey[],
  unknown: string,
  value: unknown,
): string | undefined {
  const written =
    typeof value === "object" && value !== null && !Array.isArray(value) ? Object.keys(value) : [];
  const places: { path: string[]; known: number }[] = [];
  let level: string[][] = [[]];
  for (let depth = 0; depth <= misplacedDepth; depth++) {
    const next: string[][] = [];
    for (const below of level) {
      for (const def of objectsAt(schema, [...path, ...below])) {
        for (const key of Object.keys(def.shape ?? {})) {
          next.push([...below, key]);
          if (depth === 0 || key !== unknown) continue;
          const there = objectsAt(schema, [...path, ...below, key]);
          const known = written.filter((name) => there.some((d) => d.shape?.[name])).length;
          places.push({ path: [...below, key], known });
        }
      }
    }
    level = next;
  }
  places.sort((a, b) => b.known - a.known);
  const [best, second] = places;
  if (!best || (second && second.known === best.known)) return undefined;
  return best.path.join(".");
}
