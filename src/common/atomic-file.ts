import { randomBytes } from "node:crypto";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";

/**
 * Writes `content` beside `file`, then renames it into place: a reader (or a process that starts
 * after a crash) sees the old file or the new one, never a torn one. The directory is made when
 * missing (mode 0700: cordon's state is its own).
 */
export async function writeFileAtomically(
  file: string,
  content: Uint8Array | string,
  options: { mode: number },
): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    await writeFile(temporary, content, { mode: options.mode });
    await rename(temporary, file);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}
