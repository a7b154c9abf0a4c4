import { stat } from "node:fs/promises";
import type { Stats } from "node:fs";

import { SandboxStartError } from "../../common/index.js";
import type { SandboxSpec } from "../spec.js";
import { parseContainerUser, processUid } from "../workspace/index.js";
import type { ContainerClient, SystemClient } from "./client/index.js";
import { ContainerExec } from "./exec/container-exec.js";

/**
 * Whether the host's permission bits say what a sandbox may write to a bind mount: not when the
 * engine maps container uids to other host uids (userns-remap, rootless) or confines bind mounts
 * by label (SELinux). Asked once per manager; an engine that does not answer counts as "no".
 */
export async function hostPermissionsHold(system: SystemClient): Promise<boolean> {
  try {
    const { securityOptions } = await system.describe();
    return !securityOptions.some((option) => /^name=(userns|rootless|selinux)\b/.test(option));
  } catch {
    return false;
  }
}

/**
 * Refuses a sandbox whose user cannot write its `/workspace`, before any agent turn: every edit
 * would fail with "Permission denied" and the run would still end as if it had worked.
 *
 * Where host permissions hold and the sandbox user owns the directory with write and search
 * bits — or the copy was just made in volumes, its root written as theirs — the kernel will say
 * yes inside too, and nothing more is asked (a new session pays no extra exec). Otherwise the container's own kernel is asked (`test -w` as the sandbox user), so
 * ACLs, a read-only mount, user namespaces and labels count as they will for the agent.
 */
export async function assertWorkspaceWritable(
  client: ContainerClient,
  containerId: string,
  spec: SandboxSpec,
  options: {
    hostPermissionsHold: boolean;
    /**
     * The copy was made in volumes by this acquire: cordon wrote its root as the sandbox user's,
     * mode 0755, and no container has had it yet (workspace-volumes.ts). No host path to stat.
     */
    madeInVolumes?: boolean | undefined;
    signal?: AbortSignal | undefined;
  },
): Promise<void> {
  const mount = spec.mounts.find((m) => m.role === "workspace");
  if (!mount) return;
  if (options.hostPermissionsHold && options.madeInVolumes === true && !mount.readOnly) return;
  const found = await stat(mount.source).catch(() => undefined);
  const user = parseContainerUser(spec.docker.user);
  if (
    options.hostPermissionsHold &&
    !mount.readOnly &&
    found?.isDirectory() &&
    user !== undefined &&
    found.uid === user.uid &&
    (found.mode & 0o300) === 0o300
  ) {
    return;
  }
  const exec = new ContainerExec(client, containerId, spec.containerName, spec.docker.user);
  const probe = await exec.run(
    { cmd: ["sh", "-c", 'test -w "$1" && test -x "$1"', "sh", mount.target] },
    options.signal,
  );
  if (probe.exitCode === 0) return;
  const detail = found
    ? `owner ${found.uid}:${found.gid}, mode ${(found.mode & 0o777).toString(8)}`
    : "it is missing on the host";
  throw new SandboxStartError(
    `the sandbox user ${spec.docker.user} cannot write ${mount.target} (${mount.source}, ${detail}): every edit the agent tried would fail`,
    { fix: remedy(spec, found) },
  );
}

function remedy(spec: SandboxSpec, found: Stats | undefined): string {
  const user = parseContainerUser(spec.docker.user);
  if (spec.workspaceAccess === "rw") {
    // Never suggest running the sandbox as root, even for a workspace root owns.
    const owner =
      found && found.uid !== 0
        ? `set sandbox.docker.user to "${found.uid}:${found.gid}" (the workspace's owner), or `
        : "";
    return `${owner}give uid ${user?.uid ?? spec.docker.user} write access to it, or use workspace access "none" (a private copy); cordon does not change your files' owner or mode`;
  }
  const self = processUid();
  if (self !== undefined && self !== 0 && user?.uid !== self) {
    // A process that is not root cannot give its copy to another uid.
    return `set sandbox.docker.user to "auto" (cordon runs as uid ${self} and its private copy is uid ${self}'s), or run cordon as root`;
  }
  return `remove it with \`cordon sandbox rm ${spec.containerName}\` and run again (an agent may have changed its mode; cordon does not repair a workspace a container could change)`;
}
