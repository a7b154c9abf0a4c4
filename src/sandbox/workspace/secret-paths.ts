import { constants } from "node:fs";
import { open } from "node:fs/promises";
import path from "node:path";

/**
 * Which workspace paths are left out of a seed because they look like secrets. A seeded copy is
 * read by the agent, so by the model, and lands in transcripts: a `.env`, a key or a token file
 * copied there by surprise is a leak. Git's ignore rules already keep most of them out of a
 * repository's seed; a folder that is no repository is copied whole, and a repository can track
 * one. So the rule is by shape, git or not, and `sandbox.seedInclude` names a path to seed on
 * purpose.
 */

/** Directories left out whole, wherever they are. */
const secretDirectories = new Set([".ssh", ".aws", ".gnupg"]);

/** Files left out by name alone. */
const secretFileNames = new Set([".netrc", ".git-credentials"]);

/** Key files: `id_rsa`, `id_rsa.pub`, `id_ed25519-work`… and any `*.pem`. */
const keyFile = /^(id_rsa|id_ed25519|id_ecdsa|id_dsa)(\b|[._-])|\.pem$/;

/** `.env`, `.env.local`, `.env.production`…; the templates below are kept when tracked. */
const envFile = /^\.env(\..*)?$/;
const envTemplates = new Set([".env.example", ".env.sample", ".env.template"]);

/** Files that are secrets only when they hold a credential. */
const tokenFileNames = new Set([".npmrc", ".pypirc"]);
/** npm's `_authToken=`/`_auth=`/`_password=`, pypirc's `password =`, a `token:` line. */
const credentialLine = /^\s*[^#;\s]*(_authToken|_auth|_password|password|token)\s*[=:]\s*\S/im;
/** Bytes of a token file read to look for a credential. */
const tokenFileReadBytes = 64 * 1024;

/** What the seed does with a path, by its shape alone (without reading it). */
export type SecretShape =
  /** Not secret-shaped. */
  | "plain"
  /** Left out (itself, or everything below it for a directory). */
  | "secret"
  /** `.env.example` and friends: kept when git tracks it, else left out. */
  | "template"
  /** `.npmrc`/`.pypirc`: left out when it holds a credential. */
  | "token-file";

/**
 * The shape of a workspace-relative, `/`-separated path. A path below a secret directory is
 * secret itself (git lists `.ssh/id_rsa`, never `.ssh`).
 */
export function secretShape(relative: string): SecretShape {
  const parts = relative.split("/");
  const name = parts.at(-1) ?? "";
  if (parts.some((part) => secretDirectories.has(part))) return "secret";
  if (secretFileNames.has(name) || keyFile.test(name)) return "secret";
  if (envFile.test(name)) return envTemplates.has(name) ? "template" : "secret";
  if (tokenFileNames.has(name)) return "token-file";
  return "plain";
}

/** The part of a secret path to name in the note: its secret directory (`a/.ssh/`), or itself. */
function reportedAs(relative: string): string {
  const parts = relative.split("/");
  const index = parts.findIndex((part) => secretDirectories.has(part));
  return index === -1 ? relative : `${parts.slice(0, index + 1).join("/")}/`;
}

export interface SecretFilterOptions {
  /** Real path of the workspace being seeded. */
  sourceRoot: string;
  /** `sandbox.seedInclude`: normalized relative paths; a directory covers what is below it. */
  include: readonly string[];
  /** Paths git tracks (relative, `/`-separated): a tracked `.env.example` is kept. */
  tracked: ReadonlySet<string>;
}

/**
 * Decides, for each path the seed would copy, whether it is left out; remembers what it left out
 * for the one line the seed prints.
 */
export class SecretFilter {
  private readonly left = new Set<string>();

  constructor(private readonly options: SecretFilterOptions) {}

  /** Whether `relative` is left out of the seed (a file, link or directory about to be copied). */
  async leavesOut(relative: string, kind: "file" | "directory" | "symlink"): Promise<boolean> {
    if (this.included(relative)) return false;
    const shape = secretShape(relative);
    let secret = shape === "secret";
    if (shape === "template") secret = !this.options.tracked.has(relative);
    if (shape === "token-file") secret = kind !== "file" || (await this.holdsCredential(relative));
    if (secret) this.left.add(reportedAs(relative));
    return secret;
  }

  /** What was left out, sorted (directories end with `/`). */
  leftOut(): string[] {
    return [...this.left].sort();
  }

  private included(relative: string): boolean {
    return this.options.include.some(
      (entry) => relative === entry || relative.startsWith(`${entry}/`),
    );
  }

  /**
   * Reads the start of a token file — the user's own workspace file, opened without following a
   * link and without blocking on a FIFO — for a credential line. Unreadable counts as holding one.
   */
  private async holdsCredential(relative: string): Promise<boolean> {
    let handle;
    try {
      handle = await open(
        path.join(this.options.sourceRoot, relative),
        constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY,
      );
      if (!(await handle.stat()).isFile()) return true;
      const buffer = Buffer.alloc(tokenFileReadBytes);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      return credentialLine.test(buffer.subarray(0, bytesRead).toString("utf8"));
    } catch {
      return true;
    } finally {
      await handle?.close();
    }
  }
}

/** The one line a seed prints about what it left out. */
export function describeLeftOut(leftOut: readonly string[], includeKey: string): string {
  const shown = leftOut.slice(0, 8).join(", ");
  const more = leftOut.length > 8 ? ` and ${leftOut.length - 8} more` : "";
  return `left secret-shaped paths out of the seed: ${shown}${more} (to seed one on purpose, name it in ${includeKey})`;
}
