import { readFile } from "node:fs/promises";

/** Where the kernel lists this process's mounts (one line per mount, the fifth field its mount point). */
const mountInfoPath = "/proc/self/mountinfo";

/**
 * The mount points in a `/proc/<pid>/mountinfo` text, in mount order (a point mounted over twice
 * appears twice). The kernel writes space, tab, newline and backslash in paths as `\ooo` octal
 * escapes; they are decoded here so the result compares equal to a real path.
 */
export function parseMountPoints(mountInfo: string): string[] {
  const points: string[] = [];
  for (const line of mountInfo.split("\n")) {
    const field = line.split(" ")[4];
    if (field)
      points.push(
        field.replace(/\\([0-7]{3})/g, (_, octal: string) =>
          String.fromCharCode(parseInt(octal, 8)),
        ),
      );
  }
  return points;
}

/** How many filesystems are mounted at `target` (an absolute path, symlinks resolved); 0 on a host without /proc. */
export async function mountCountAt(target: string): Promise<number> {
  const text = await readFile(mountInfoPath, "utf8").catch(() => "");
  return parseMountPoints(text).filter((point) => point === target).length;
}
