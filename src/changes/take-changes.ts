import { randomUUID } from "node:crypto";

import { FileOperationError, SandboxError } from "../common/index.js";
import type { Sandbox } from "../sandbox/index.js";
import { quoteShellArg } from "../tools/index.js";
import { baselineRef } from "../sandbox/index.js";

/** Biggest patch taken out of a sandbox. */
const maxPatchBytes = 64 * 1024 * 1024;

/**
 * Inside the sandbox: stage everything (tracked and untracked, not ignored) in a throwaway index
 * and diff it against the baseline. Runs as the sandbox's user, in the sandbox, so whatever the
 * agent did to the copy's git config or hooks stays in there; the host only ever sees the patch.
 */
const diffScript = `
set -eu
if ! git rev-parse --verify -q ${baselineRef} >/dev/null; then
  echo "no ${baselineRef} in this workspace" >&2
  exit 64
fi
index="$(mktemp)"
trap 'rm -f "$index"' EXIT
export GIT_INDEX_FILE="$index"
git read-tree ${baselineRef}
git add -A .
git -c core.quotePath=false -c diff.noprefix=false -c diff.mnemonicPrefix=false diff --cached --binary --no-color --no-ext-diff --no-textconv --full-index --src-prefix=a/ --dst-prefix=b/ ${baselineRef} >"$1"
`;

/**
 * The changes made in a seeded private workspace since it was seeded, as one `git apply`-able
 * patch, byte for byte (file contents need not be UTF-8). Empty when nothing changed.
 */
export async function takeChanges(
  sandbox: Sandbox,
  options: { signal?: AbortSignal | undefined } = {},
): Promise<Uint8Array> {
  // The patch goes through a file, not stdout: exec output is text, a patch is bytes.
  const patchFile = `/tmp/.cordon-changes-${randomUUID()}.patch`;
  const result = await sandbox.exec(
    `bash -c ${quoteShellArg(diffScript)} diff ${quoteShellArg(patchFile)}`,
    {
      signal: options.signal,
    },
  );
  if (result.exitCode === 64) {
    throw new FileOperationError(
      "this workspace has no cordon baseline, so its changes cannot be told apart",
      "not_found",
      sandbox.workdir,
      {
        fix: "diff and apply work on seeded private copies (sandbox.workspaceAccess none with seed on); with rw the changes are already in the workspace",
      },
    );
  }
  try {
    if (result.exitCode !== 0) {
      throw new SandboxError(
        `taking the changes out of the sandbox failed: ${result.stderr.trim()}`,
        {
          fix: "inspect the workspace with `cordon exec -- git status`",
        },
      );
    }
    return await sandbox.readFile(patchFile, { signal: options.signal, maxBytes: maxPatchBytes });
  } finally {
    await sandbox.remove(patchFile).catch(() => undefined);
  }
}
