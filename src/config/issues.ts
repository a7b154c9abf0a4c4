import type { z } from "zod";

import { ConfigError } from "../common/index.js";
import { suggestKey } from "./key-suggestions.js";

/** One problem in a config, at a path a user can find (`agents.list[1].sandbox.scope`). */
export interface ConfigIssue {
  path: string;
  message: string;
}

/** `["agents", "list", 1, "id"]` → `agents.list[1].id`; the root is `(root)`. */
export function formatConfigPath(path: readonly PropertyKey[]): string {
  let text = "";
  for (const part of path) {
    if (typeof part === "number") text += `[${part}]`;
    else if (typeof part === "string" && /^[A-Za-z_$][\w$]*$/.test(part))
      text += text ? `.${part}` : part;
    else text += `[${JSON.stringify(String(part))}]`;
  }
  return text || "(root)";
}

type ZodIssue = z.core.$ZodIssue;

interface Described {
  /** Path below the issue's own path (union alternatives report deeper problems). */
  subPath: readonly PropertyKey[];
  message: string;
}

function deepestPath(branch: readonly ZodIssue[]): number {
  return Math.max(...branch.map((issue) => issue.path.length));
}

/** What the checked value holds at `at`, if anything. */
function valueAt(input: unknown, at: readonly PropertyKey[]): unknown {
  let value = input;
  for (const part of at) {
    if (typeof value !== "object" || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[part];
  }
  return value;
}

function describeIssue(
  issue: ZodIssue,
  schema: z.ZodType | undefined,
  at: readonly PropertyKey[],
  input: unknown,
): Described[] {
  switch (issue.code) {
    case "unrecognized_keys":
      return issue.keys.map((key) => {
        const suggestion = schema && suggestKey(schema, at, key, valueAt(input, [...at, key]));
        return {
          subPath: [],
          message: `unknown key "${key}"${suggestion ? ` (did you mean "${suggestion}"?)` : ""}`,
        };
      });
    case "invalid_value":
      return [
        {
          subPath: [],
          message: `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`,
        },
      ];
    case "invalid_union": {
      // Report the alternative that got furthest: its issues sit deepest in the value.
      const best = issue.errors
        .filter((branch) => branch.length > 0)
        .sort((a, b) => deepestPath(b) - deepestPath(a))[0];
      if (best && deepestPath(best) > 0) {
        return best.flatMap((inner) =>
          describeIssue(inner, schema, [...at, ...inner.path], input).map((d) => ({
            subPath: [...inner.path, ...d.subPath],
            message: d.message,
          })),
        );
      }
      return [{ subPath: [], message: "value has the wrong type or form" }];
    }
    default:
      return [{ subPath: [], message: issue.message.replace(/^Invalid input: /, "") }];
  }
}

/**
 * Flattens zod issues into `path: message` pairs; with the schema, unknown keys that look like a
 * typo of a known one, or a known one written too high, get a suggestion (with `input`, the value
 * checked, a misplaced key's own keys say where it belongs).
 */
export function configIssuesOf(
  error: z.ZodError,
  schema?: z.ZodType,
  input?: unknown,
): ConfigIssue[] {
  return error.issues.flatMap((issue) =>
    describeIssue(issue, schema, issue.path, input).map((d) => ({
      path: formatConfigPath([...issue.path, ...d.subPath]),
      message: d.message,
    })),
  );
}

/** `  path: message` lines. */
export function formatConfigIssues(issues: readonly ConfigIssue[]): string {
  return issues.map((issue) => `  ${issue.path}: ${issue.message}`).join("\n");
}

/** An invalid config: the message lists every issue; `issues` has them one by one. */
export class ConfigValidationError extends ConfigError {
  constructor(
    /** What was checked: a file path, or "the config". */
    readonly where: string,
    readonly issues: readonly ConfigIssue[],
    fix = "fix the keys above; `cordon config schema` prints every key and `cordon help configuration` explains them",
  ) {
    const count = issues.length === 1 ? "1 problem" : `${issues.length} problems`;
    super(`${where} has ${count}:\n${formatConfigIssues(issues)}`, { fix });
  }
}

/** A `ConfigValidationError` for these issues. */
export function configErrorOf(
  where: string,
  issues: readonly ConfigIssue[],
): ConfigValidationError {
  return new ConfigValidationError(where, issues);
}
