import path from "node:path";

import { ConfigError } from "../common/index.js";
import { normalizeCarryPath } from "../config/index.js";
import type { HostEntryKind } from "./mount-plan.js";
import { planned, type Planned } from "./planned.js";

export interface CarryPlanInput {
  /** `sandbox.carry` of the agent (schema-checked). */
  configured: readonly string[];
  /** Where `configured` came from, e.g. `agents.defaults.sandbox.carry`. */
  configKey: string;
  /** The run's `--carry` values; when given, they replace `configured`. */
  flag?: readonly string[] | undefined;
  /** Absolute, symlink-resolved agent workspace. */
  workspace: string;
  /** Whether the sandbox gets a seeded private copy (workspaceAccess none, seed on). */
  seeded: boolean;
  workspaceAccessKey: string;
  entryKind: (p: string) => HostEntryKind | undefined;
}

/**
 * The paths carried into the seeded copy, each once, none inside another. A `--carry` value that
 * is malformed or missing is a usage error (the user typed it for this run: `node_moduels` must
 * not end as "mocha: not found" minutes later); a missing `sandbox.carry` entry is a warning (one
 * config may serve projects with and without a `.venv`).
 */
export function planCarry(input: CarryPlanInput): Planned<string[]> {
  const fromFlag = input.flag !== undefined;
  const source = fromFlag ? "--carry" : input.configKey;
  const wanted: string[] = [];
  const warnings: string[] = [];
  for (const value of input.flag ?? input.configured) {
    const normalized = normalizeCarryPath(value);
    if ("problem" in normalized) {
      // Only a flag gets here: the schema refuses the same value in a file.
      throw new ConfigError(`${source} ${JSON.stringify(value)}: ${normalized.problem}`, {
        fix: "name workspace-relative paths, e.g. --carry node_modules,.venv",
      });
    }
    wanted.push(normalized.path);
  }
  if (wanted.length === 0) return planned([]);
  if (!input.seeded) {
    return planned([], {
      warnings: [
        `${source} is ignored: it fills a seeded private copy, and this sandbox has none (${input.workspaceAccessKey} "none" with seed on makes one)`,
      ],
    });
  }

  const carried: string[] = [];
  for (const entry of [...new Set(wanted)].sort()) {
    // `node_modules` already holds `node_modules/.bin`.
    if (carried.some((outer) => entry.startsWith(`${outer}/`))) continue;
    const kind = input.entryKind(path.posix.join(input.workspace, entry));
    if (kind === undefined) {
      const message = `${source}: ${entry} does not exist in the workspace ${input.workspace}`;
      if (fromFlag) {
        throw new ConfigError(message, {
          fix: `check the spelling, or install the dependencies first (e.g. \`npm ci\` makes node_modules)`,
        });
      }
      warnings.push(`${message}; nothing is carried for it`);
      continue;
    }
    if (kind === "symlink") {
      warnings.push(
        `${source}: ${entry} is a symlink; the copy gets the link itself, not what it points at (cordon never follows a link out of the workspace)`,
      );
    } else if (kind === "other") {
      warnings.push(
        `${source}: ${entry} is not a file or directory (a FIFO, socket or device); nothing is carried for it`,
      );
      continue;
    }
    carried.push(entry);
  }
  const notes =
    carried.length > 0
      ? [
          `carry ${carried.join(", ")} (${source}): copied from the workspace into the seeded copy, writable there, never part of a diff`,
        ]
      : [];
  return planned(carried, { warnings, notes });
}
