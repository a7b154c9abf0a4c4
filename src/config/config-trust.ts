import { createHash } from "node:crypto";
import path from "node:path";

import { hostRealpath } from "./host-paths.js";
import { ConfigValidationError, formatConfigIssues } from "./issues.js";
import type { LooseningKey } from "./loosening-keys.js";
import { readTrustStore, writeTrustStore, type TrustRecord } from "./trust-store.js";

/**
 * Trust in a config file (DESIGN.md §10). A file the user named (`--config`, `CORDON_CONFIG`) is
 * trusted; a file cordon found in the working directory came with the repository and is trusted
 * only when `cordon config trust` recorded exactly these bytes at exactly this place. Anchors:
 * direnv `allow`, mise `trust`, VS Code workspace trust.
 */

/** How cordon came to read a config file. */
export type ConfigOrigin = "--config" | "CORDON_CONFIG" | "working directory";

/** The config file a load used, and whether it is trusted. */
export interface ConfigSource {
  /** Absolute path as found. */
  file: string;
  origin: ConfigOrigin;
  /** Named files always; a found one only when trusted with these bytes at this place. */
  trusted: boolean;
  /** sha256 of the bytes that were parsed, lowercase hex. */
  sha256: string;
}

export function sha256Of(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/**
 * The place a file is trusted for: its directory's real path joined with its own name. The
 * directory is resolved so `/tmp/link/cordon.json5` and its real path are one place; the name is
 * not, so a `cordon.json5` a repository links to a file you trusted elsewhere is a new place,
 * untrusted: trust covers a file where it applies (its directory is the default workspace and
 * what its relative paths mean), not its bytes anywhere.
 */
export function configLocation(file: string): string {
  const absolute = path.resolve(file);
  // hostRealpath also resolves a directory that is gone, so `untrust` still finds its record.
  return path.join(hostRealpath(path.dirname(absolute)), path.basename(absolute));
}

export interface TrustLookup {
  trusted: boolean;
  /** The place was trusted with other bytes: the file changed since. */
  changed: boolean;
  /** The store was unreadable and ignored. */
  warning?: string;
}

/** Whether the store trusts these bytes (by hash) at this file's place. */
export async function lookUpTrust(
  stateDir: string,
  file: string,
  sha256: string,
): Promise<TrustLookup> {
  const store = await readTrustStore(stateDir);
  const location = configLocation(file);
  const here = store.records.filter((record) => record.path === location);
  const lookup: TrustLookup = {
    trusted: here.some((record) => record.sha256 === sha256),
    changed: here.length > 0,
  };
  if (lookup.trusted) lookup.changed = false;
  if (store.warning) lookup.warning = store.warning;
  return lookup;
}

/** Records these bytes as trusted at this file's place, replacing what was trusted there. */
export async function trustConfigFile(
  stateDir: string,
  file: string,
  sha256: string,
): Promise<{ record: TrustRecord; warning?: string }> {
  const store = await readTrustStore(stateDir);
  const record: TrustRecord = {
    path: configLocation(file),
    sha256,
    trustedAt: new Date().toISOString(),
  };
  await writeTrustStore(stateDir, [
    ...store.records.filter((other) => other.path !== record.path),
    record,
  ]);
  return store.warning ? { record, warning: store.warning } : { record };
}

/** Forgets this file's place; false when it was not trusted. */
export async function untrustConfigFile(
  stateDir: string,
  file: string,
): Promise<{ removed: boolean; location: string; warning?: string }> {
  const store = await readTrustStore(stateDir);
  const location = configLocation(file);
  const kept = store.records.filter((record) => record.path !== location);
  const removed = kept.length < store.records.length;
  if (removed) await writeTrustStore(stateDir, kept);
  return store.warning ? { removed, location, warning: store.warning } : { removed, location };
}

/** `./cordon.json5` for a file in the working directory; the absolute path otherwise. */
export function displayPath(file: string, cwd: string): string {
  const relative = path.relative(cwd, file);
  return relative && !relative.startsWith("..") && !path.isAbsolute(relative)
    ? `./${relative}`
    : file;
}

/** `"off"`, `["/a:/b"]`: a value as a user would write it, kept short. */
export function formatKeyValue(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** A discovered, untrusted file that loosens isolation (exit 2): each key, and how to go on. */
export class UntrustedConfigError extends ConfigValidationError {
  constructor(
    readonly source: ConfigSource,
    readonly keys: readonly LooseningKey[],
    options: { cwd: string; changed: boolean },
  ) {
    const shown = displayPath(source.file, options.cwd);
    const issues = keys.map((key) => ({
      path: key.path,
      message: `${formatKeyValue(key.value)} — ${key.reason}`,
    }));
    super(
      source.file,
      issues,
      `read ${shown}; if you accept what it sets, run \`cordon config trust ${shown}\` (or name it with --config)`,
    );
    // A refusal rather than a schema problem: the message says why the file is not believed.
    const why = options.changed
      ? "was found in the working directory and has changed since you trusted it"
      : "was found in the working directory, not named with --config or CORDON_CONFIG, and you have not trusted it";
    this.message =
      `${source.file} ${why}. A config file that came with a repository may tighten isolation but not loosen it, and this one loosens it:\n` +
      formatConfigIssues(issues);
  }
}
