const units: Record<string, number> = {
  "": 1,
  b: 1,
  k: 1024,
  m: 1024 ** 2,
  g: 1024 ** 3,
  t: 1024 ** 4,
};

/**
 * Bytes from a config size: a number is bytes; "512m", "1g", "1.5GiB" use powers of 1024 like
 * Docker does. Returns undefined for anything else.
 */
export function parseByteSize(value: string | number): number | undefined {
  if (typeof value === "number")
    return Number.isSafeInteger(value) && value > 0 ? value : undefined;
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(value);
  if (!match) return undefined;
  const factor = units[(match[2] ?? "").toLowerCase()];
  if (factor === undefined) return undefined;
  const bytes = Math.floor(Number(match[1]) * factor);
  return bytes > 0 && Number.isSafeInteger(bytes) ? bytes : undefined;
}

/** 1073741824 → "1 GiB", for explanations. */
export function formatByteSize(bytes: number): string {
  for (const [unit, factor] of [
    ["TiB", 1024 ** 4],
    ["GiB", 1024 ** 3],
    ["MiB", 1024 ** 2],
    ["KiB", 1024],
  ] as const) {
    if (bytes >= factor && bytes % (factor / 1024) === 0) {
      const value = bytes / factor;
      return `${Number.isInteger(value) ? value : value.toFixed(2)} ${unit}`;
    }
  }
  return `${bytes} B`;
}
