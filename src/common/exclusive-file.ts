import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { link, unlink, writeFile } from "node:fs/promises";

import { onProcessExit } from "./exit-cleanup.js";

/**
 * Creates `file` holding `contents`, or returns false when it exists: what a lock file needs.
 * The contents go to a private temporary file first, which is linked into place — link(2) fails on
 * an existing name, so the file is never seen empty or half-written.
 */
export async function createExclusive(file: string, contents: string): Promise<boolean> {
  const temporary = `${file}.${process.pid}.${randomUUID()}.tmp`;
  // A process made to exit meanwhile (a second Ctrl-C) skips the `finally` below: the temporary
  // file would be left beside the lock for good.
  const forget = onProcessExit(() => rmSync(temporary, { force: true }));
  try {
    await writeFile(temporary, contents, { mode: 0o600, flag: "wx" });
  } catch (error) {
    forget();
    throw error;
  }
  try {
    await link(temporary, file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  } finally {
    await unlinkIfPresent(temporary);
    forget();
  }
}

/** Removes `file`; one that is already gone is not an error. */
export async function unlinkIfPresent(file: string): Promise<void> {
  try {
    await unlink(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}
