/**
 * Freezes `value` and everything in it (plain JSON data: objects and arrays), so it can be shared
 * instead of copied, and what is computed from it can be kept (a transcript's lines, a run's tool
 * list). Returns it.
 */
export function freezeDeep<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) freezeDeep(child);
    Object.freeze(value);
  }
  return value;
}
