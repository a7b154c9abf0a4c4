import path from "node:path";

import type { SupportVolumes } from "./support-volumes.js";

const hostsFileName = "hosts";

/** Where the hosts file is mounted in a sandbox with no network. */
export const hostsMountTarget = "/etc/hosts";

/**
 * Where the hosts file's volume itself is mounted (read-only) beside the bind of its file: a bind
 * is invisible to Docker's count of a volume's users, so without this mount the engine would let
 * the volume be removed under a stopped sandbox, which then cannot start again.
 */
export const hostsVolumeTarget = "/.cordon-hosts";

/** The hosts file of a sandbox: its support volume, and the file's path on the engine's host. */
export interface HostsFile {
  volume: string;
  path: string;
}

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
 * The hosts file for `extraHosts`: in a support volume named by its content, so every sandbox with the same entries shares one file that never changes under
 * a running container, made on the engine (local or elsewhere) on first use. Mounted read-only:
 * the agent cannot edit it.
 */
export async function ensureHostsFile(
  support: SupportVolumes,
  extraHosts: readonly string[],
  image: string,
): Promise<HostsFile> {
  const file = {
    name: hostsFileName,
    content: Buffer.from(hostsFileContent(extraHosts)),
    mode: 0o644,
  };
  const volume = await support.ensure("hosts", [file], image);
  return { volume: volume.name, path: path.posix.join(volume.mountpoint, hostsFileName) };
}
