import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { mkdir, open, rename, rm } from "node:fs/promises";
import path from "node:path";

import { z } from "zod";

import { messageOf } from "../common/index.js";

/**
 * The config files the user trusts, by location and content: `<state dir>/trusted-configs.json`
 * (`cordon config trust` / `untrust`). Only cordon, as the user, writes it; a store that anyone
 * else could have written, or that does not parse, counts as empty (with a warning) — never as
 * trusting anything.
 */

const storeFileName = "trusted-configs.json";

const trustRecord = z.strictObject({
  /** Where the file is found: its directory's real path joined with its name. */
  path: z.string().min(1),
  /** sha256 of the file's bytes, lowercase hex. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** ISO 8601, when `cordon config trust` recorded it. */
  trustedAt: z.string(),
});
const storeSchema = z.strictObject({ version: z.literal(1), trusted: z.array(trustRecord) });

export type TrustRecord = z.output<typeof trustRecord>;

export interface TrustStoreContents {
  records: TrustRecord[];
  /** Why the store on disk was ignored (then `records` is empty). */
  warning?: string;
}

export function trustStorePath(stateDir: string): string {
  return path.join(stateDir, storeFileName);
}

/**
 * The trusted files. Opened without following a link, and checked to be a regular file of this
 * user that nobody else may write, so another local user or a planted link cannot vouch for a file.
 */
export async function readTrustStore(stateDir: string): Promise<TrustStoreContents> {
  const file = trustStorePath(stateDir);
  const ignored = (why: string): TrustStoreContents => ({
    records: [],
    warning: `the trust store ${file} ${why}, so no config file counts as trusted; run \`cordon config trust\` again for the files you trust (it writes a new store)`,
  });
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { records: [] };
    return ignored(`cannot be opened (${messageOf(error)})`);
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) return ignored("is not a regular file");
    const uid = process.getuid?.();
    if (uid !== undefined && stats.uid !== uid) return ignored(`belongs to uid ${stats.uid}`);
    if ((stats.mode & 0o022) !== 0) return ignored("is writable by other users");
    let value: unknown;
    try {
      value = JSON.parse(await handle.readFile("utf8"));
    } catch (error) {
      return ignored(`is not valid JSON (${messageOf(error)})`);
    }
    const parsed = storeSchema.safeParse(value);
    if (!parsed.success) return ignored("is not in the format this cordon writes");
    return { records: parsed.data.trusted };
  } finally {
    await handle.close();
  }
}

/** Replaces the store: written to a new file (mode 0600) and renamed over the old one. */
export async function writeTrustStore(
  stateDir: string,
  records: readonly TrustRecord[],
): Promise<void> {
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  const target = trustStorePath(stateDir);
  const temporary = `${target}.${randomBytes(6).toString("hex")}.tmp`;
  const body = `${JSON.stringify({ version: 1, trusted: records }, null, 2)}\n`;
  try {
    const handle = await open(temporary, "wx", 0o600);
    try {
      await handle.writeFile(body);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, target);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}
