import { readFile, readdir, rm } from "node:fs/promises";
import path from "node:path";

import { z } from "zod";

import { writeFileAtomically } from "../../common/index.js";

/**
 * What cordon remembers about a sandbox beside Docker's own view: when it was last used and
 * which config the last acquire asked for. Docker stays the source of truth for what exists; a
 * record only adds times, and is dropped only after its container is gone.
 */
const sandboxRecordSchema = z.object({
  version: z.literal(1),
  containerName: z.string(),
  containerId: z.string(),
  scopeKey: z.string(),
  /** Config hash of the container as created. */
  configHash: z.string(),
  /** Config hash the most recent acquire asked for; differs from configHash when stale. */
  wantedConfigHash: z.string(),
  /** Image the most recent acquire resolved to. */
  wantedImage: z.string().optional(),
  privateWorkspace: z.string().optional(),
  createdAt: z.string(),
  lastUsedAt: z.string(),
  /**
   * When cordon stopped the container for being idle (see idle-stop.ts); the next acquire starts
   * it again and writes the record anew, without it.
   */
  idleStoppedAt: z.string().optional(),
  /**
   * Set when the container was a pool member taken for this sandbox (pool/warm-pool.ts). Docker
   * cannot relabel a container, so its labels still name the pool; this says what it is now, and
   * holds only for the container id above (see `labelsOf`).
   */
  pooled: z
    .object({
      /** Its name while it waited in the pool. */
      member: z.string(),
      scope: z.string(),
      agentId: z.string(),
      sessionKey: z.string(),
    })
    .optional(),
});

export type SandboxRecord = z.infer<typeof sandboxRecordSchema>;

/** `<stateDir>/sandboxes`. */
export function recordsDirectory(stateDirectory: string): string {
  return path.join(stateDirectory, "sandboxes");
}

const safeName = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** Sandbox records under the state directory, one JSON file per container name. */
export class SandboxRecords {
  constructor(private readonly stateDirectory: string) {}

  private fileOf(containerName: string): string {
    if (!safeName.test(containerName)) throw new Error(`invalid container name ${containerName}`);
    return path.join(recordsDirectory(this.stateDirectory), `${containerName}.json`);
  }

  async read(containerName: string): Promise<SandboxRecord | undefined> {
    try {
      return parseRecord(await readFile(this.fileOf(containerName), "utf8"));
    } catch {
      // Missing or unreadable: a record is a convenience, Docker knows what exists.
      return undefined;
    }
  }

  async readAll(): Promise<SandboxRecord[]> {
    let names: string[];
    try {
      names = await readdir(recordsDirectory(this.stateDirectory));
    } catch {
      return [];
    }
    const records = await Promise.all(
      names
        .filter((name) => name.endsWith(".json") && safeName.test(name))
        .map((name) => this.read(name.slice(0, -".json".length))),
    );
    return records.filter((record): record is SandboxRecord => record !== undefined);
  }

  /** Atomic (temp file + rename): concurrent writers never leave a torn file. */
  async write(record: SandboxRecord): Promise<void> {
    const file = this.fileOf(record.containerName);
    await writeFileAtomically(file, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  }

  /** Applies `change` to the record, if there is one. */
  async update(
    containerName: string,
    change: (record: SandboxRecord) => SandboxRecord,
  ): Promise<void> {
    const record = await this.read(containerName);
    if (record) await this.write(change(record));
  }

  async remove(containerName: string): Promise<void> {
    await rm(this.fileOf(containerName), { force: true });
  }
}

function parseRecord(text: string): SandboxRecord | undefined {
  const parsed = sandboxRecordSchema.safeParse(JSON.parse(text));
  return parsed.success ? parsed.data : undefined;
}
