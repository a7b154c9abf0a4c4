import { writeFile } from "node:fs/promises";
import path from "node:path";

import { CordonError, ExitCode, PolicyDeniedError, messageOf } from "../common/index.js";
import { parsePatch, type PatchedFile } from "./parse-git-patch.js";
import { withIsolatedGit } from "./isolated-git.js";
import { patchProblems, type PatchProblem } from "./patch-problems.js";
import { readRepositoryLinks } from "./repository-links.js";

/** The real workspace changed underneath the copy in a way the patch does not fit. */
export class ChangesConflictError extends CordonError {
  readonly code = "changes_conflict";
  readonly exitCode = ExitCode.usage;
  constructor(
    message: string,
    readonly files: string[],
    options: { fix?: string } = {},
  ) {
    super(message, options);
  }
}

export interface ApplyOutcome {
  files: PatchedFile[];
  /** False for `check` (nothing written) and for an empty patch. */
  applied: boolean;
}

/** Names git reports in `error: patch failed: X:12`, `error: X: does not exist`, and the like. */
function conflictingFiles(stderr: string): string[] {
  const names = new Set<string>();
  for (const line of stderr.split("\n")) {
    const failed = /^error: patch failed: (.+):\d+$/.exec(line);
    const other =
      /^error: (.+?): (?:does not exist|already exists|patch does not apply|No such file|wrong type)/.exec(
        line,
      );
    const name = failed?.[1] ?? other?.[1];
    if (name) names.add(name);
  }
  return [...names];
}

/** Names and link targets are the agent's: a control character is shown, never sent to a terminal. */
function controlsShown(text: string): string {
  return text.replace(
    // eslint-disable-next-line no-control-regex
    /[\u0000-\u001f\u007f-\u009f]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/**
 * Refuses (PolicyDeniedError, exit 7) changes that are unsafe for this workspace (patch-problems.ts),
 * with its own links read from disk: the check `cordon apply` and fix-tests' verdict share.
 */
export function assertSafeChanges(workspace: string, files: readonly PatchedFile[]): void {
  const problems: PatchProblem[] = patchProblems(files, readRepositoryLinks(workspace));
  if (problems.length > 0) {
    const named = problems.map((p) => controlsShown(`${p.path} ${p.problem}`));
    throw new PolicyDeniedError(`the changes are not safe to apply: ${named.join("; ")}`, {
      fix: "review them with `cordon diff`; apply the safe parts by hand",
    });
  }
}

/**
 * Whether the workspace already holds these changes (a second `cordon apply`): the patch does not
 * apply forwards but its reverse applies cleanly. Reads the workspace, writes nothing.
 */
export async function changesAlreadyApplied(
  workspace: string,
  patch: Uint8Array,
): Promise<boolean> {
  if (parsePatch(patch).length === 0) return false;
  return withIsolatedGit(workspace, async (git, scratch) => {
    const patchFile = path.join(scratch, "changes.patch");
    await writeFile(patchFile, patch);
    const applies = (args: string[]): Promise<boolean> =>
      git(["apply", "--binary", "--whitespace=nowarn", "--check", ...args, patchFile]).then(
        () => true,
        () => false,
      );
    return !(await applies([])) && (await applies(["--reverse"]));
  });
}

/**
 * git's own diffstat of a patch (`git apply --stat`: ` path | 3 ++-`, then the summary line),
 * with names quoted by git, so control characters an agent put in a name are shown, not obeyed.
 */
export async function patchStat(workspace: string, patch: Uint8Array): Promise<string> {
  if (parsePatch(patch).length === 0) return "";
  return withIsolatedGit(workspace, async (git, scratch) => {
    const patchFile = path.join(scratch, "changes.patch");
    await writeFile(patchFile, patch);
    return (await git(["apply", "--stat", patchFile])).stdout;
  });
}

/**
 * Applies a patch taken from a sandbox to the real workspace, all or nothing (`git apply` is
 * atomic without --reject, and `--check` runs first). Refuses a patch the strict parser cannot
 * read and unsafe ones before git sees them (paths leaving the workspace or into .git, submodules,
 * symlinks the kernel would resolve out of it: assertSafeChanges), and a patch that no longer fits
 * the workspace, naming the files.
 *
 * git runs with a git dir cordon owns (withIsolatedGit), so the repository's filters, hooks,
 * fsmonitor and attributes never run on the host; git's own refusals (paths beyond a symlink,
 * outside the tree) still hold.
 */
export async function applyChanges(
  workspace: string,
  patch: Uint8Array,
  options: { check?: boolean } = {},
): Promise<ApplyOutcome> {
  const files = parsePatch(patch);
  if (files.length === 0) return { files, applied: false };
  assertSafeChanges(workspace, files);
  return withIsolatedGit(workspace, async (git, scratch) => {
    const patchFile = path.join(scratch, "changes.patch");
    await writeFile(patchFile, patch);
    const apply = (args: string[]) =>
      git(["apply", "--binary", "--whitespace=nowarn", ...args, patchFile]);
    try {
      await apply(["--check"]);
    } catch (error) {
      const output = (error as { stderr?: unknown }).stderr;
      const stderr = typeof output === "string" ? output : messageOf(error);
      const names = conflictingFiles(stderr);
      throw new ChangesConflictError(
        `the changes do not apply: the workspace changed underneath them${names.length > 0 ? ` (${names.join(", ")})` : ""}\n${stderr.trim()}`,
        names,
        {
          fix: "commit or stash your own edits to those files, or apply `cordon diff` output by hand",
        },
      );
    }
    if (options.check) return { files, applied: false };
    await apply([]);
    return { files, applied: true };
  });
}
