import { createHash, randomUUID } from "node:crypto";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";

import { CordonError, ExitCode } from "../common/index.js";

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

/** sha256 of a patch, in hex: how a patch is named to the user and compared. */
export function patchDigest(patch: Uint8Array): string {
  return createHash("sha256").update(patch).digest("hex");
}

function recordPaths(stateDir: string, containerName: string): { patch: string; digest: string } {
  // Container names are cordon's own ([a-z0-9_.-]); anything else is hashed, never a path.
  const name = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(containerName)
    ? containerName
    : patchDigest(Buffer.from(containerName)).slice(0, 32);
  const base = path.join(stateDir, "changes", name);
  return { patch: `${base}.patch`, digest: `${base}.sha256` };
}

async function writeAtomically(file: string, content: Uint8Array | string): Promise<void> {
  const temporary = `${file}.${process.pid}.${randomUUID()}.tmp`;
  await writeFile(temporary, content, { mode: 0o600 });
  await rename(temporary, file);
}

/** Records `patch` as shown to the user for this sandbox; returns its digest. */
export async function recordShownChanges(
  stateDir: string,
  containerName: string,
  patch: Uint8Array,
): Promise<string> {
  const files = recordPaths(stateDir, containerName);
  await mkdir(path.dirname(files.patch), { recursive: true, mode: 0o700 });
  const digest = patchDigest(patch);
  // The digest last: it is what apply trusts, and it names a patch already in place.
  await writeAtomically(files.patch, patch);
  await writeAtomically(files.digest, `${digest}\n`);
  return digest;
}

/** The digest of the patch last shown for this sandbox, if any. */
export async function lastShownDigest(
  stateDir: string,
  containerName: string,
): Promise<string | undefined> {
  const text = await readFile(recordPaths(stateDir, containerName).digest, "utf8").catch(
    () => undefined,
  );
  const digest = text?.trim();
  return digest && /^[0-9a-f]{64}$/.test(digest) ? digest : undefined;
}

/** Forgets what was shown (after it was applied: the next apply needs a new review). */
export async function forgetShownChanges(stateDir: string, containerName: string): Promise<void> {
  const files = recordPaths(stateDir, containerName);
  await rm(files.digest, { force: true });
  await rm(files.patch, { force: true });
}
