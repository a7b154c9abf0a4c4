import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { CordonError, ExitCode, PolicyDeniedError, messageOf } from "../common/index.js";
import { parsePatch, type PatchedFile } from "./parse-git-patch.js";
import { patchProblems } from "./patch-problems.js";

const run = promisify(execFile);

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

/**
 * Applies a patch taken from a sandbox to the real workspace, all or nothing (`git apply` is
 * atomic without --reject). Refuses unsafe patches before git sees them (paths leaving the
 * workspace or into .git, submodules, symlinks pointing out), and a patch that no longer fits
 * the workspace, naming the files.
 */
export async function applyChanges(
  workspace: string,
  patch: Uint8Array,
  options: { check?: boolean } = {},
): Promise<ApplyOutcome> {
  const files = parsePatch(patch);
  if (files.length === 0) return { files, applied: false };
  const problems = patchProblems(files);
  if (problems.length > 0) {
    throw new PolicyDeniedError(
      `the changes are not safe to apply: ${problems.map((p) => `${p.path} ${p.problem}`).join("; ")}`,
      { fix: "review them with `cordon diff`; apply the safe parts by hand" },
    );
  }
  const scratch = await mkdtemp(path.join(os.tmpdir(), "cordon-apply-"));
  try {
    const patchFile = path.join(scratch, "changes.patch");
    await writeFile(patchFile, patch);
    const git = (args: string[]) =>
      run("git", ["apply", "--binary", "--whitespace=nowarn", ...args, patchFile], {
        cwd: workspace,
        maxBuffer: 16 * 1024 * 1024,
      });
    try {
      await git(["--check"]);
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
    await git([]);
    return { files, applied: true };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
