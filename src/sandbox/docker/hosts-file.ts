import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";

import { writeFileAtomically } from "../../common/index.js";

/** Where the hosts file is mounted in a sandbox with no network. */
export const hostsMountTarget = "/etc/hosts";

/**
 * The /etc/hosts of a sandbox with no network: `localhost` and the configured extra hosts.
 *
 * Such a sandbox is created with `NetworkDisabled`, which skips Docker's network setup (a start
 * about 100 ms faster on Docker 20.10; runc still gives it a namespace with only loopback) but also
 * skips writing /etc/hosts and drops `ExtraHosts`, so cordon writes the file itself. A
 * `host-gateway` entry is left out: with no network there is no route to the host's gateway.
 */
export function hostsFileContent(extraHosts: readonly string[]): string {
  const lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"];
  for (const entry of extraHosts) {
    // Validated by the policy layer as "hostname:ip"; the address may itself contain colons.
    const colon = entry.indexOf(":");
    const address = entry.slice(colon + 1);
    if (address !== "host-gateway") lines.push(`${address}\t${entry.slice(0, colon)}`);
  }
  return `${lines.join("\n")}\n`;
}

/**
 * Writes the hosts file for `extraHosts` under the state directory, named by its content so
 * every sandbox with the same entries shares one file that never changes under a running
 * container, and returns its path. Mounted read-only: the agent cannot edit the host's copy.
 */
export async function ensureHostsFile(
  stateDirectory: string,
  extraHosts: readonly string[],
): Promise<string> {
  const content = hostsFileContent(extraHosts);
  const digest = createHash("sha256").update(content).digest("hex").slice(0, 16);
  const file = path.join(stateDirectory, "hosts", `hosts-${digest}`);
  const existing = await readFile(file, "utf8").catch(() => undefined);
  if (existing === content) return file;
  // Atomic: a concurrent acquire never mounts a torn file. World-readable: inside the container
  // the sandbox user, whatever its uid, reads it.
  await writeFileAtomically(file, content, { mode: 0o644 });
  return file;
}
