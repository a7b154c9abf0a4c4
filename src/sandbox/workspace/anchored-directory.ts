import { spawn } from "node:child_process";
import { constants } from "node:fs";
import { open, readlink } from "node:fs/promises";

/**
 * Mounting over, or unmounting, a directory inside a private copy — a tree whose processes may be
 * running — by its path would follow whatever the path names when mount(8) looks it up. An agent
 * that swaps the directory (or one above it) for a link between cordon's check and that lookup
 * could aim the mount at any directory of the host. So the directory is opened here without
 * following a link, checked to be at exactly that path (the kernel's own name for what was
 * opened), and handed to the tool as its fd 3, named `/proc/self/fd/3` with `-c` (mount and
 * umount then take the name as it is): the kernel acts on the directory that was checked, wherever
 * a link points by then.
 */

/** The name the tool is given for the directory: its fd 3, which the kernel follows to it. */
const anchoredName = "/proc/self/fd/3";

/** Why a directory could not be used as an anchor (not a directory, a link, moved). */
export class UnanchoredDirectoryError extends Error {}

/**
 * Runs `tool` (mount or umount) with `args(anchoredName)` on the directory at `target` (absolute,
 * links resolved), opened and checked as described above. Rejects with `UnanchoredDirectoryError`
 * when `target` is not a directory at its own path, and with the tool's failure (its stderr in
 * the message) when the tool fails.
 */
export async function runOnAnchoredDirectory(
  tool: string,
  target: string,
  args: (at: string) => string[],
): Promise<void> {
  const handle = await open(
    target,
    constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW,
  ).catch((error: NodeJS.ErrnoException) => {
    throw new UnanchoredDirectoryError(`${target} is not a directory of its own (${error.code})`);
  });
  try {
    const opened = await readlink(`/proc/self/fd/${handle.fd}`);
    if (opened !== target) {
      throw new UnanchoredDirectoryError(`${target} led to ${opened}: a link is on the way`);
    }
    await runWithDirectory(tool, args(anchoredName), handle.fd);
  } finally {
    await handle.close();
  }
}

function runWithDirectory(tool: string, args: string[], fd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(tool, args, { stdio: ["ignore", "ignore", "pipe", fd] });
    let stderr = "";
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (text: string) => (stderr += text));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code === 0) resolve();
      else reject(Object.assign(new Error(`${tool} exited with ${code}`), { stderr }));
    });
  });
}
