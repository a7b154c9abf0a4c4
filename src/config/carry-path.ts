/**
 * `sandbox.carry` entries and `--carry` values: paths of the agent workspace, relative to it, that
 * are copied into the seeded private copy (dependencies like `node_modules` or `.venv`). One rule
 * for both, so a flag is refused exactly like the same value in a file.
 */

/** The entry in its one spelling (`./node_modules/` → `node_modules`), or why it is refused. */
export function normalizeCarryPath(value: string): { path: string } | { problem: string } {
  let trimmed = value.trim();
  if (trimmed.includes("\0")) return { problem: "must not contain NUL bytes" };
  if (trimmed.startsWith("/") || /^[A-Za-z]:[\\/]/.test(trimmed)) {
    return { problem: "must be relative to the agent workspace (e.g. node_modules), not absolute" };
  }
  while (trimmed.startsWith("./")) trimmed = trimmed.slice(2);
  while (trimmed.endsWith("/")) trimmed = trimmed.slice(0, -1);
  const segments = trimmed.split("/");
  if (trimmed === "" || trimmed === ".") {
    return { problem: "names the whole workspace; name the ignored directories to carry" };
  }
  if (segments.some((segment) => segment === "" || segment === "." || segment === "..")) {
    return { problem: "must be a plain path inside the workspace (no `..`, `.` or empty parts)" };
  }
  if (segments[0] === ".git") {
    return {
      problem:
        "the repository's .git is seeded sanitized (no hooks, no config); carrying it would bring them in",
    };
  }
  return { path: segments.join("/") };
}

/** The problem with a carry entry, for the schema; undefined when it is fine. */
export function carryPathProblem(value: string): string | undefined {
  const normalized = normalizeCarryPath(value);
  return "problem" in normalized ? normalized.problem : undefined;
}
