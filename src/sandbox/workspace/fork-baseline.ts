import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { chmod, copyFile, lchown, lstat, mkdir, readdir, rename, rm } from "node:fs/promises";
import path from "node:path";

import { SandboxError, throwIfAborted } from "../../common/index.js";
import { processUid } from "./owner.js";
import { baselineGitDir, seedMarkerPath } from "./paths.js";

/**
 * What a fork's private copy takes from its parent besides the files: cordon's baseline git dir
 * (so the fork's diff is still against the repository as it was seeded) and the seed marker (so
 * `cordon apply` from the fork writes to the same repository). Both are cordon's own, beside the
 * copy in the folder no container reaches; this moves their bytes and runs no program over them.
 *
 * Only what a baseline is made of is copied (`recordBaseline` writes these): the checkpoint
 * store inside the dir is written by inspector containers, and the parent's checkpoints stay the
 * parent's, so a fork starts with none. Anything but a directory or a regular file there is
 * refused, never followed.
 */
const baselineEntries = ["HEAD", "config", "packed-refs", "info", "refs", "objects"];

/**
 * Gives the private copy `to` the baseline and seed marker of `from`, replacing any it has (a
 * warm pool member's, seeded afresh). Written beside and renamed into place, so `to` has either
 * its old baseline or the whole new one.
 */
export async function forkBaseline(
  from: string,
  to: string,
  options: { signal?: AbortSignal | undefined } = {},
): Promise<void> {
  const source = baselineGitDir(from);
  const target = baselineGitDir(to);
  const building = `${target}.fork-${process.pid}-${randomBytes(4).toString("hex")}`;
  const asRoot = processUid() === 0;
  try {
    const top = await lstat(source);
    if (!top.isDirectory()) throw notCordons(source);
    await mkdir(building, { mode: 0o700 });
    for (const entry of baselineEntries) {
      const found = await lstat(path.join(source, entry)).catch(() => undefined);
      if (!found) continue;
      await copyEntry(path.join(source, entry), path.join(building, entry), asRoot, options.signal);
    }
    if (asRoot) await lchown(building, top.uid, top.gid);
    await rm(target, { recursive: true, force: true });
    await rename(building, target);
  } finally {
    await rm(building, { recursive: true, force: true });
  }
  await copyFile(seedMarkerPath(from), seedMarkerPath(to));
}

async function copyEntry(
  from: string,
  to: string,
  asRoot: boolean,
  signal: AbortSignal | undefined,
): Promise<void> {
  throwIfAborted(signal, "forking a sandbox");
  const stats = await lstat(from);
  if (stats.isDirectory()) {
    await mkdir(to, { mode: 0o700 });
    for (const name of await readdir(from)) {
      await copyEntry(path.join(from, name), path.join(to, name), asRoot, signal);
    }
  } else if (stats.isFile()) {
    // A reflink where the filesystem has them; git's objects never change once written.
    await copyFile(from, to, constants.COPYFILE_FICLONE);
  } else {
    throw notCordons(from);
  }
  await chmod(to, stats.mode & 0o777);
  if (asRoot) await lchown(to, stats.uid, stats.gid);
}

function notCordons(file: string): SandboxError {
  return new SandboxError(`${file} in cordon's baseline git dir is not a file or directory`, {
    fix: "cordon writes none there: remove the parent sandbox (`cordon sandbox rm`) if it was tampered with",
  });
}
