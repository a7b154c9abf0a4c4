import { randomBytes } from "node:crypto";

import { SandboxError } from "../../common/index.js";
import type { ContainerClient } from "./client/index.js";
import { inspectorLabels } from "./inspector/workspace-inspector.js";

export interface WorkspaceVolumeUsageOptions {
  containers: ContainerClient;
  /** The copy's workspace volume (workspace-volumes.ts). */
  volume: string;
  /** The sandbox whose copy it is: names the measuring container and its label. */
  sandboxName: string;
  stateDirectory: string;
  /** The sandbox's image: it has `du`. */
  image: string;
}

/**
 * Bytes a copy in a Docker volume takes on the engine's disk (allocated blocks), for
 * `sandbox.disk`: the local volume driver cannot bound a volume on disk, so the budget is watched
 * (DiskWatchdog) as for an unbounded host copy. Measured where the volume is, by `du -s -x -k` in
 * a throwaway container: the agent's tree is hostile data, and the host runs no program over it
 * (DESIGN.md §10). du never follows a link and `-x` keeps it in the volume; the container has no
 * network, a read-only root, the volume read-only, and of root's capabilities only
 * CAP_DAC_READ_SEARCH — so a directory the agent made unreadable is still counted, and nothing
 * can be written. Only du's stdout is read, and only a number is taken from it.
 */
export async function workspaceVolumeUsage(options: WorkspaceVolumeUsageOptions): Promise<number> {
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
      Mounts: [{ Type: "volume", Source: options.volume, Target: "/volume", ReadOnly: true }],
      LogConfig: { Type: "json-file", Config: { "max-size": "1m", "max-file": "1" } },
    },
  });
  if (id === undefined) {
    throw new SandboxError(`cannot create ${name} to measure ${options.volume}: the name is taken`);
  }
  try {
    await options.containers.start(id, name);
    await options.containers.wait(id);
    const stdout = stdoutText(await options.containers.logs(id, { stdout: true, stderr: false }));
    // Exit 1 with a total: some entries vanished while walked. The total is what counts.
    const total = /^(\d+)\t\/volume\n/.exec(stdout);
    if (!total?.[1]) {
      throw new SandboxError(`cannot measure ${options.volume}: du said ${JSON.stringify(stdout)}`);
    }
    return Number(total[1]) * 1024;
  } finally {
    await options.containers.remove(id, name);
  }
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
