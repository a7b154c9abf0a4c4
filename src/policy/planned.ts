import type { ConfigIssue } from "../config/index.js";

/** What a planner found beside its decision; `combine` joins them in the order given. */
export interface Findings {
  /** Refusals: the plan fails, listing every one (`path: message`). */
  issues: ConfigIssue[];
  /** The plan goes on; `explain` shows them. */
  warnings: string[];
  /** Lines for `explain`: a decision and the config key that made it. */
  notes: string[];
}

/**
 * A planner's answer: what it decided and what it found. Planners return these rather than push
 * into lists their caller shares, so the order of calls carries no meaning of its own.
 */
export interface Planned<T> extends Findings {
  value: T;
}

/** A decision with its findings (each absent list empty). */
export function planned<T>(value: T, findings: Partial<Findings> = {}): Planned<T> {
  return {
    value,
    issues: findings.issues ?? [],
    warnings: findings.warnings ?? [],
    notes: findings.notes ?? [],
  };
}

/** The findings of several planners, each list in the order the parts are given. */
export function combine(parts: readonly Partial<Findings>[]): Findings {
  return {
    issues: parts.flatMap((part) => part.issues ?? []),
    warnings: parts.flatMap((part) => part.warnings ?? []),
    notes: parts.flatMap((part) => part.notes ?? []),
  };
}
