import { isErrno } from "./tree-copy.js";

/**
 * True when a process with this pid exists (EPERM: it does, as another user's). Seeds and disk
 * images being built carry their builder's pid, so leftovers of a dead process can be removed.
 */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return isErrno(error, "EPERM");
  }
}
