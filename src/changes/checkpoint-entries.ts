import type { CheckpointListEntry } from "./checkpoints.js";

/** `turn-12` → `turn` and 12: a name numbered as `nextName` numbers them. */
const numbered = /^(.+)-(\d+)$/;

/**
 * A copy's checkpoint list as this process read it, oldest first, with the highest number each
 * prefix (`turn`, `cp`, `before-rollback`) has reached: a turn adds its line in place and names
 * the next one without going over the list, so a session's n-th turn costs what its first did.
 * Appended to in place: whoever reads `items` reads it before the next append.
 */
export class CheckpointEntries {
  readonly items: CheckpointListEntry[] = [];
  readonly #highest = new Map<string, number>();

  constructor(entries: Iterable<CheckpointListEntry> = []) {
    this.add(entries);
  }

  add(entries: Iterable<CheckpointListEntry>): this {
    for (const entry of entries) {
      this.items.push(entry);
      const match = numbered.exec(entry.name);
      if (!match) continue;
      const [, prefix = "", digits = ""] = match;
      const number = Number(digits);
      if (number > (this.#highest.get(prefix) ?? 0)) this.#highest.set(prefix, number);
    }
    return this;
  }

  /** `<prefix>-<n>`, one past the highest such name in the list (`-1` in an empty one). */
  nextName(prefix: string): string {
    return `${prefix}-${(this.#highest.get(prefix) ?? 0) + 1}`;
  }
}
