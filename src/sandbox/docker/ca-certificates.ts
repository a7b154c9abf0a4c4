import { readFile } from "node:fs/promises";
import path from "node:path";

import { SandboxStartError, messageOf } from "../../common/index.js";
import type { MountSpec } from "../spec.js";
import type { SupportVolumes } from "./support-volumes.js";

/**
 * The support volume holding the host's CA bundle of `trustHostCertificates` (the plan's mount of
 * role "ca-certificates"), made on the engine from this host's file — so a sandbox on an engine
 * elsewhere trusts what this host trusts (a TLS-inspecting egress), which a bind of the host's
 * path could not give it: the engine would bind its own host's file, or none. Named by content:
 * a changed bundle is a new volume for the sandboxes made after it. Undefined without the mount.
 *
 * The bytes are the host's own configuration, read by cordon's process, never a file of the
 * agent's; the volume is mounted read-only, root-owned, in the sandbox.
 */
export async function ensureCaCertificatesVolume(
  support: SupportVolumes,
  mount: Pick<MountSpec, "source" | "target"> | undefined,
  image: string,
): Promise<string | undefined> {
  if (!mount) return undefined;
  let content: Buffer;
  try {
    content = await readFile(mount.source);
  } catch (error) {
    throw new SandboxStartError(
      `cannot read the host's CA bundle ${mount.source} (sandbox.egress.trustHostCertificates): ${messageOf(error)}`,
      {
        fix: "check the file exists and is readable, or turn off sandbox.egress.trustHostCertificates",
      },
    );
  }
  const file = { name: path.posix.basename(mount.target), content, mode: 0o644 };
  return (await support.ensure("ca-certificates", [file], image)).name;
}
