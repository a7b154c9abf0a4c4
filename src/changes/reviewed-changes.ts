import { rm } from "node:fs/promises";

import { CordonError, ExitCode } from "../common/index.js";
import {
  changesRecordPaths,
  patchDigest,
  readDigestRecord,
  writeChangesRecord,
} from "../sandbox/index.js";

export { patchDigest };

/**
 * What `cordon diff` last showed for a sandbox, kept under the state directory (never in the
 * sandbox, where a process could change it): the patch and its sha256. `cordon apply` applies a
 * patch only when its hash is the one shown, so the bytes written are the bytes reviewed.
 */

/** The changes in the sandbox are not the ones `cordon diff` last showed; nothing was written. */
export class ChangesNotReviewedError extends CordonError {
  readonly code = "changes_not_reviewed";
  readonly exitCode = ExitCode.usage;
}

/** Records `patch` as shown to the user for this sandbox; returns its digest. */
export async function recordShownChanges(
  stateDir: string,
  containerName: string,
  patch: Uint8Array,
): Promise<string> {
  const files = changesRecordPaths(stateDir, containerName);
  const digest = patchDigest(patch);
  // The digest last: it is what apply trusts, and it names a patch already in place.
  await writeChangesRecord(files.patch, patch);
  await writeChangesRecord(files.digest, `${digest}\n`);
  return digest;
}

/** The digest of the patch last shown for this sandbox, if any. */
export async function lastShownDigest(
  stateDir: string,
  containerName: string,
): Promise<string | undefined> {
  return readDigestRecord(changesRecordPaths(stateDir, containerName).digest);
}

/** Forgets what was shown (after it was applied: the next apply needs a new review). */
export async function forgetShownChanges(stateDir: string, containerName: string): Promise<void> {
  const files = changesRecordPaths(stateDir, containerName);
  await rm(files.digest, { force: true });
  await rm(files.patch, { force: true });
}
