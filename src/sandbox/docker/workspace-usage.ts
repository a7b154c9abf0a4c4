import { randomBytes } from "node:crypto";

import { SandboxError } from "../../common/index.js";
import type { BindMount, ContainerClient, VolumeMount } from "./client/index.js";
import { inspectorLabels } from "./inspector/workspace-inspector.js";

/** Where a private copy is: a Docker volume on the engine, or a plain directory on this host. */
export type MeasuredCopy = { volume: string } | { directory: string };

export interface WorkspaceUsageOptions {
  containers: ContainerClient;
  /** The copy: its workspace volume (workspace-volumes.ts) or its host directory. */
  copy: MeasuredCopy;
  /** The sandbox whose copy it is: names the measuring container and its label. */
  sandboxName: string;
  stateDirectory: string;
  /** The sandbox's image: it has `du`. */
  image: string;
}

/**
 * Bytes an unbounded private copy takes on disk (allocated blocks), for `sandbox.disk` where the
 * kernel cannot bound it (DiskWatchdog): a copy in a Docker volume (no volume driver bounds one on
 * disk), or a plain directory on this host (cordon may not mount a disk image without root).
 * Measured by `du -s -x -k` in a throwaway container, never by a host program: the agent's tree is
 * hostile data (DESIGN.md §10), and a du of cordon's own user cannot read a directory the agent
 * made unreadable (`chmod 000`), so the bytes behind it would go uncounted. du never follows a
 * link and `-x` keeps it in the copy; the container has no network, a read-only root, the copy
 * read-only, and of root's capabilities only CAP_DAC_READ_SEARCH — so what is hidden is still
 * counted, and nothing can be written. Only du's stdout is read, and only a number is taken from it.
 */
export async function workspaceUsage(options: WorkspaceUsageOptions): Promise<number> {
  const name = `${options.sandboxName}-du-${randomBytes(4).toString("hex")}`;
  const id = await options.containers.create({
    name,
    Image: options.image,
    User: "0:0",
    WorkingDir: "/",
    Env: [],
    Entrypoint: ["du"],
    Cmd: ["-s", "-x", "-k", "/volume"],
    // An inspector's labels: prune removes one a dead process left behind.
    Labels: {
      [inspectorLabels.sandbox]: options.sandboxName,
      [inspectorLabels.home]: options.stateDirectory,
    },
    NetworkDisabled: true,
    HostConfig: {
      NetworkMode: "none",
      ReadonlyRootfs: true,
      CapDrop: ["ALL"],
      CapAdd: ["DAC_READ_SEARCH"],
      SecurityOpt: ["no-new-privileges:true"],
      Privileged: false,
      Memory: 256 * 1024 * 1024,
      PidsLimit: 16,
      Mounts: [copyMount(options.copy)],
      LogConfig: { Type: "json-file", Config: { "max-size": "1m", "max-file": "1" } },
    },
  });
  if (id === undefined) {
    throw new SandboxError(
      `cannot create ${name} to measure ${copyName(options.copy)}: the name is taken`,
    );
  }
  try {
    await options.containers.start(id, name);
    await options.containers.wait(id);
    const stdout = stdoutText(await options.containers.logs(id, { stdout: true, stderr: false }));
    // Exit 1 with a total: some entries vanished while walked. The total is what counts.
    const total = /^(\d+)\t\/volume\n/.exec(stdout);
    if (!total?.[1]) {
      throw new SandboxError(
        `cannot measure ${copyName(options.copy)}: du said ${JSON.stringify(stdout)}`,
      );
    }
    return Number(total[1]) * 1024;
  } finally {
    await options.containers.remove(id, name);
  }
}

/** The copy mounted read-only at /volume, where du measures it. */
function copyMount(copy: MeasuredCopy): BindMount | VolumeMount {
  return "volume" in copy
    ? { Type: "volume", Source: copy.volume, Target: "/volume", ReadOnly: true }
    : { Type: "bind", Source: copy.directory, Target: "/volume", ReadOnly: true };
}

function copyName(copy: MeasuredCopy): string {
  return "volume" in copy ? copy.volume : copy.directory;
}

/** The stdout of a log without a TTY: frames of an 8-byte header (stream, size) and data. */
function stdoutText(log: Buffer): string {
  const parts: Buffer[] = [];
  for (let at = 0; at + 8 <= log.length;) {
    const size = log.readUInt32BE(at + 4);
    if (log[at] === 1) parts.push(log.subarray(at + 8, at + 8 + size));
    at += 8 + size;
  }
  return Buffer.concat(parts).toString("utf8");
}
