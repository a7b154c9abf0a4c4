import { createHash } from "node:crypto";
import { readFile, rm } from "node:fs/promises";
import path from "node:path";

import { writeFileAtomically } from "../../common/index.js";

/**
 * What cordon remembers about the changes of a sandbox's private copy, under the state directory
 * (never in the sandbox, where a process could change it): the patch `cordon diff` last showed
 * with its sha256, and the sha256 of the patch `cordon apply` last applied. Apply trusts the
 * first; cleanup (prune, rm) reads the second to tell applied work from unapplied work.
 */

/** sha256 of a patch, in hex: how a patch is named to the user and compared. */
export function patchDigest(patch: Uint8Array): string {
  return createHash("sha256").update(patch).digest("hex");
}

export interface ChangesRecordPaths {
  /** The patch last shown. */
  patch: string;
  /** Its sha256. */
  digest: string;
  /** The sha256 of the patch last applied. */
  applied: string;
}

/** `<stateDir>/changes/<container name>.{patch,sha256,applied}`. */
export function changesRecordPaths(stateDir: string, containerName: string): ChangesRecordPaths {
  // Container names are cordon's own ([a-z0-9_.-]); anything else is hashed, never a path.
  const name = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(containerName)
    ? containerName
    : patchDigest(Buffer.from(containerName)).slice(0, 32);
  const base = path.join(stateDir, "changes", name);
  return { patch: `${base}.patch`, digest: `${base}.sha256`, applied: `${base}.applied` };
}

/** Writes `content` aside, then renames it into place: a reader sees the old or the new file. */
export async function writeChangesRecord(
  file: string,
  content: Uint8Array | string,
): Promise<void> {
  await writeFileAtomically(file, content, { mode: 0o600 });
}

/** Reads a sha256 record; undefined when missing or not a digest. */
export async function readDigestRecord(file: string): Promise<string | undefined> {
  const text = await readFile(file, "utf8").catch(() => undefined);
  const digest = text?.trim();
  return digest && /^[0-9a-f]{64}$/.test(digest) ? digest : undefined;
}

/** Records that the patch with this digest is in the real workspace (applied, or found there). */
export async function recordAppliedChanges(
  stateDir: string,
  containerName: string,
  digest: string,
): Promise<void> {
  await writeChangesRecord(changesRecordPaths(stateDir, containerName).applied, `${digest}\n`);
}

/** The digest of the patch last applied from this sandbox, if any. */
export function appliedChangesDigest(
  stateDir: string,
  containerName: string,
): Promise<string | undefined> {
  return readDigestRecord(changesRecordPaths(stateDir, containerName).applied);
}

/** Forgets everything recorded for a sandbox (it was removed: a new one starts afresh). */
export async function forgetChangesRecords(stateDir: string, containerName: string): Promise<void> {
  const files = changesRecordPaths(stateDir, containerName);
  await Promise.all(
    [files.patch, files.digest, files.applied].map((file) => rm(file, { force: true })),
  );
}
