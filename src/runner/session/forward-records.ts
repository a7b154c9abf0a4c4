import { readdir, readFile, rm } from "node:fs/promises";
import path from "node:path";

import { z } from "zod";

import {
  currentProcessIdentity,
  processState,
  writeFileAtomically,
  type ProcessIdentity,
} from "../../common/index.js";

/** A `cordon port-forward` (or library forward) listening now, as other processes see it. */
export interface ForwardRecord {
  /** The container forwarded into. */
  sandbox: string;
  address: string;
  localPort: number;
  remotePort: number;
  startedAt: string;
  /** The process that listens: the record means nothing once it has ended. */
  holder: ProcessIdentity;
}

const forwardRecordSchema = z.object({
  sandbox: z.string(),
  address: z.string(),
  localPort: z.number().int(),
  remotePort: z.number().int(),
  startedAt: z.string(),
  holder: z.object({
    pid: z.number().int(),
    host: z.string(),
    startTicks: z.number().optional(),
    bootId: z.string().optional(),
  }),
});

function forwardsDirectory(stateDir: string): string {
  return path.join(stateDir, "forwards");
}

/**
 * Records a forward this process has started, so `sandbox list`, `explain` and every stop or
 * removal of another process see it; the returned function removes the record. A record whose
 * process died without removing it is ignored (and deleted) by the next reader.
 */
export async function recordForward(
  stateDir: string,
  forward: Omit<ForwardRecord, "startedAt" | "holder">,
): Promise<() => Promise<void>> {
  const record: ForwardRecord = {
    ...forward,
    startedAt: new Date().toISOString(),
    holder: currentProcessIdentity(),
  };
  // One process listens on one local address and port at a time: the pair names the record.
  const file = path.join(
    forwardsDirectory(stateDir),
    `${process.pid}-${forward.address.replace(/[^\w.-]/g, "_")}-${forward.localPort}.json`,
  );
  await writeFileAtomically(file, `${JSON.stringify(record)}\n`, { mode: 0o600 });
  return () => rm(file, { force: true });
}

/** The forwards whose process still runs (or runs on another host, where cordon cannot tell). */
export async function liveForwards(stateDir: string): Promise<ForwardRecord[]> {
  const directory = forwardsDirectory(stateDir);
  const names = await readdir(directory).catch(() => [] as string[]);
  const live: ForwardRecord[] = [];
  for (const name of names.filter((entry) => entry.endsWith(".json")).sort()) {
    const file = path.join(directory, name);
    const parsed = forwardRecordSchema.safeParse(
      await readFile(file, "utf8")
        .then((text) => JSON.parse(text) as unknown)
        .catch(() => undefined),
    );
    // A record that cannot be read holds nothing: a forward that cannot be shown is not kept.
    if (!parsed.success) continue;
    if (processState(parsed.data.holder) === "dead") {
      await rm(file, { force: true });
      continue;
    }
    live.push(parsed.data);
  }
  return live;
}

/** `127.0.0.1:8080 -> 3000 (pid 4242)`: where to connect, and which process to stop. */
export function describeForward(forward: ForwardRecord): string {
  const host = forward.address.includes(":") ? `[${forward.address}]` : forward.address;
  return `${host}:${forward.localPort} -> ${forward.remotePort} (pid ${forward.holder.pid})`;
}
