import { statSync } from "node:fs";
import path from "node:path";

import { InvalidArgumentError } from "commander";

import { parseDuration } from "./commands/parse-duration.js";

/** Option parsers shared by commands; commander reports their errors as usage errors (exit 2). */
export function positiveInteger(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed <= 0) {
    throw new InvalidArgumentError("expected a whole number greater than 0");
  }
  return parsed;
}

/** A whole number from 1 to `max`; the message says the range. */
export function wholeNumberUpTo(max: number): (value: string) => number {
  return (value) => {
    const parsed = Number(value);
    if (!Number.isInteger(parsed) || parsed < 1 || parsed > max) {
      throw new InvalidArgumentError(`expected a whole number from 1 to ${max}`);
    }
    return parsed;
  };
}

/** A flag that may be given more than once: each value, in order. */
export function repeatable(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** A duration option (`90s`, `10m`, `1h30m`) in milliseconds. */
export function durationOf(flag: string): (value: string) => number {
  return (value) => parseDuration(value, flag);
}

/** A comma-separated list; repeating the flag adds to it. */
export function nameList(value: string, previous: string[] | undefined): string[] {
  const names = value
    .split(",")
    .map((name) => name.trim())
    .filter((name) => name.length > 0);
  return [...(previous ?? []), ...names];
}

/**
 * A directory that exists, as an absolute path: a mistyped `--workspace` is a usage error (exit
 * 2) at once, not a sandbox failure after the plan.
 */
export function existingDirectory(value: string): string {
  const resolved = path.resolve(value);
  const stats = statSync(resolved, { throwIfNoEntry: false });
  if (!stats) throw new InvalidArgumentError(`${resolved} does not exist`);
  if (!stats.isDirectory()) throw new InvalidArgumentError(`${resolved} is not a directory`);
  return resolved;
}
