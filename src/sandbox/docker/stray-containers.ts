import { stat } from "node:fs/promises";

import type { ContainerClient } from "./client/index.js";
import { labelKeys } from "./container-options.js";

/** Containers labelled with a state directory that no longer exists on this host. */
export interface StrayHome {
  /** The state directory (`cordon.home`) the containers were made for. */
  home: string;
  containers: string[];
}

/**
 * Containers (sandboxes, egress proxies, pool members, inspectors) whose state directory is gone,
 * newest first:
 * a temporary `CORDON_HOME` deleted while they stayed. Every cordon command works on its own state
 * directory only, so nothing would ever see them again. Only meaningful on an engine that shares
 * this host's filesystem; a directory that cannot be looked at (another user's) counts as there.
 */
export async function strayHomes(containers: ContainerClient): Promise<StrayHome[]> {
  const byHome = new Map<string, { names: string[]; newestMs: number }>();
  for (const container of await containers.list({ labels: [labelKeys.home] })) {
    const home = container.labels[labelKeys.home];
    if (!home) continue;
    const found = byHome.get(home) ?? { names: [], newestMs: 0 };
    found.names.push(container.name);
    found.newestMs = Math.max(found.newestMs, container.createdAtMs);
    byHome.set(home, found);
  }
  const strays: (StrayHome & { newestMs: number })[] = [];
  for (const [home, { names, newestMs }] of byHome) {
    const gone = await stat(home).then(
      () => false,
      (error: NodeJS.ErrnoException) => error.code === "ENOENT",
    );
    if (gone) strays.push({ home, containers: names.sort(), newestMs });
  }
  // The most recent first: the leftovers of what was just run are the ones worth a look.
  return strays
    .sort((a, b) => b.newestMs - a.newestMs)
    .map(({ home, containers: names }) => ({ home, containers: names }));
}
