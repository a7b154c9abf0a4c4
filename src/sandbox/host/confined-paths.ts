import { readlink, realpath } from "node:fs/promises";
import path from "node:path";

import { FileOperationError } from "../../common/index.js";

/** How many symbolic links one resolution may follow (the kernel's own limit). */
const maxLinkHops = 40;

/**
 * Path confinement of the host backend: sandbox paths are host paths, relative ones resolve
 * against the root, and every path must stay inside the root after resolving symbolic links at
 * every component (the final one included, also when it dangles). `..` and absolute paths
 * elsewhere are refused before anything is touched.
 *
 * This guards the file tools; it is not a boundary against a hostile agent, who in mode off can
 * run commands on the host anyway (DESIGN.md §4: trusted use only).
 */
export class ConfinedPaths {
  /**
   * @param root the real (symlink-free) root every path must stay in.
   * @param readOnlyRoots real directories outside the root that may also be read (the exec logs).
   */
  constructor(
    readonly root: string,
    private readonly readOnlyRoots: readonly string[] = [],
  ) {}

  /** The absolute, normalized form of a sandbox path; refuses one that leaves the root lexically. */
  lexical(input: string, options: { reading?: boolean } = {}): string {
    if (input.includes("\0"))
      throw new FileOperationError("the path contains a NUL byte", "other", input);
    const abs = path.resolve(this.root, input);
    if (!this.#allowed(abs, options.reading === true)) throw outside(input);
    return abs;
  }

  /**
   * The real path `abs` denotes, following every symbolic link (a dangling final link is followed
   * to where it would create a file). Missing components are allowed; the result is checked.
   * Throws ENOTDIR/ELOOP-style errors as `FileOperationError`.
   */
  async follow(abs: string, options: { reading?: boolean } = {}): Promise<string> {
    const real = await resolveReal(abs, 0);
    if (!this.#allowed(real, options.reading === true)) throw outside(abs);
    return real;
  }

  /**
   * The real path of the entry `abs` names without following it: its parent resolved, its own
   * name kept (what remove and rename act on). The root itself is not an entry.
   */
  async entry(abs: string): Promise<string> {
    if (abs === this.root) {
      throw new FileOperationError(`${abs} is the workspace root itself`, "other", abs);
    }
    const parent = await resolveReal(path.dirname(abs), 0);
    const entry = path.join(parent, path.basename(abs));
    if (!isInside(entry, this.root) || entry === this.root) throw outside(abs);
    return entry;
  }

  #allowed(candidate: string, reading: boolean): boolean {
    if (isInside(candidate, this.root)) return true;
    return reading && this.readOnlyRoots.some((root) => isInside(candidate, root));
  }
}

export function isInside(candidate: string, root: string): boolean {
  return (
    candidate === root ||
    candidate.startsWith(root.endsWith(path.sep) ? root : `${root}${path.sep}`)
  );
}

function outside(input: string): FileOperationError {
  return new FileOperationError(
    `${input} is outside the workspace (after resolving symbolic links)`,
    "outside_sandbox",
    input,
    { fix: "use a path inside the workspace" },
  );
}

async function resolveReal(abs: string, hops: number): Promise<string> {
  try {
    return await realpath(abs);
  } catch (error) {
    if (errnoOf(error) !== "ENOENT") throw fileError(error, abs);
  }
  // Something is missing: the final component, or a component further up, or a link dangles.
  const parent = path.dirname(abs);
  if (parent === abs) return abs;
  const realParent = await resolveReal(parent, hops);
  const candidate = path.join(realParent, path.basename(abs));
  let target: string;
  try {
    target = await readlink(candidate);
  } catch (error) {
    const code = errnoOf(error);
    // Not a link (EINVAL) or not there at all: the name is where a new file would go.
    if (code === "EINVAL" || code === "ENOENT") return candidate;
    throw fileError(error, abs);
  }
  if (hops >= maxLinkHops) {
    throw new FileOperationError(`${abs}: too many levels of symbolic links`, "other", abs);
  }
  return resolveReal(path.resolve(realParent, target), hops + 1);
}

export function errnoOf(error: unknown): string | undefined {
  if (typeof error === "object" && error !== null && "code" in error) {
    const code = error.code;
    if (typeof code === "string") return code;
  }
  return undefined;
}

const reasonByErrno: Record<string, FileOperationError["reason"]> = {
  ENOENT: "not_found",
  EACCES: "permission_denied",
  EPERM: "permission_denied",
  EROFS: "read_only",
  EISDIR: "is_directory",
  ENOTDIR: "not_directory",
  EEXIST: "exists",
  EFBIG: "too_large",
};

/** A Node file-system error as the `FileOperationError` tools understand. */
export function fileError(error: unknown, input: string, operation?: string): FileOperationError {
  if (error instanceof FileOperationError) return error;
  const code = errnoOf(error) ?? "";
  const reason = reasonByErrno[code] ?? "other";
  const detail = error instanceof Error ? error.message.replace(/^\w+: /, "") : String(error);
  const message = operation ? `cannot ${operation} ${input}: ${detail}` : `${input}: ${detail}`;
  return new FileOperationError(message, reason, input, { cause: error });
}
