import { statfs } from "node:fs/promises";

import { mountCountAt } from "../workspace/mount-table.js";
import type { ContainerStats } from "./client/index.js";
import type { DockerEngine } from "./engine.js";

/** What a sandbox uses now: CPU and memory from the engine, its disk budget's filesystem. */
export interface SandboxUsage extends ContainerStats {
  /**
   * The private workspace's disk image (`sandbox.disk`): bytes in use and its size. Undefined when
   * it has none mounted (no budget, or cordon may not mount: then nothing measures it here).
   */
  disk?: { usedBytes: number; sizeBytes: number } | undefined;
}

/**
 * The resource use of one sandbox, for `cordon top`; undefined when its container is not running.
 *
 * The disk figure never walks the agent's tree on the host (DESIGN.md §10): it is `statfs` of the
 * disk image's mount point — one system call on cordon's own path, answered by the kernel from
 * the filesystem's superblock counters, reading nothing the agent wrote. A workspace that is a
 * plain directory would give the host filesystem's figures, so it is only asked when the mount
 * table says an image is mounted there.
 */
export async function readSandboxUsage(
  engine: DockerEngine,
  sandbox: { name: string; privateWorkspace?: string | undefined },
): Promise<SandboxUsage | undefined> {
  const stats = await engine.containers.stats(sandbox.name);
  if (!stats) return undefined;
  return { ...stats, disk: await diskImageUsage(sandbox.privateWorkspace) };
}

async function diskImageUsage(
  workspace: string | undefined,
): Promise<SandboxUsage["disk"] | undefined> {
  if (workspace === undefined || (await mountCountAt(workspace)) === 0) return undefined;
  const fs = await statfs(workspace).catch(() => undefined);
  if (!fs) return undefined;
  return { usedBytes: (fs.blocks - fs.bfree) * fs.bsize, sizeBytes: fs.blocks * fs.bsize };
}
