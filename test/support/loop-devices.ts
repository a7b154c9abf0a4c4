import { readFile, readdir } from "node:fs/promises";

/** Files the loop devices of this host are backed by (what `losetup -a` shows, read from sysfs). */
export async function loopBackingFiles(): Promise<string[]> {
  const devices = await readdir("/sys/block").catch(() => []);
  const files: string[] = [];
  for (const device of devices.filter((name) => name.startsWith("loop"))) {
    const file = await readFile(`/sys/block/${device}/loop/backing_file`, "utf8").catch(() => "");
    if (file.trim()) files.push(file.trim());
  }
  return files;
}
