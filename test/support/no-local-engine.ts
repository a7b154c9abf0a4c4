import { realpathSync } from "node:fs";
import path from "node:path";

/**
 * A command and its arguments, wrapped to run where this host's Docker engine cannot be reached:
 * in a mount namespace of its own (`unshare -m`, private propagation) whose directory of the
 * engine's socket (/var/run, usually /run) is an empty tmpfs — no docker.sock exists there, as on
 * a laptop with no engine. `exec` all the way down, so the returned pid is the command's own and
 * a signal reaches it. Needs root (CI and these machines run as root).
 */
export function withoutLocalEngine(
  command: string,
  args: readonly string[],
): { command: string; args: string[] } {
  const socketDirectory = realpathSync(path.dirname("/var/run/docker.sock"));
  return {
    command: "unshare",
    args: [
      "-m",
      "sh",
      "-c",
      'mount -t tmpfs -o mode=755 cordon-no-engine "$0" && exec "$@"',
      socketDirectory,
      command,
      ...args,
    ],
  };
}
