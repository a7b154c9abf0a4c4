import { constants } from "node:fs";
import { link, lstat, mkdir, open, readlink, realpath, symlink } from "node:fs/promises";
import { once } from "node:events";
import path from "node:path";

import { extract } from "tar-stream";

import { SandboxError } from "../../../common/index.js";

/** What an extraction wrote: entries (directories included) and file bytes. */
export interface ExtractedTree {
  entries: number;
  bytes: number;
}

export interface ExtractLimits {
  /** Refuse the archive once its files add up to more bytes than this. Default 1 GiB. */
  maxBytes?: number | undefined;
  /** Refuse the archive once it has more entries than this. Default 100 000. */
  maxEntries?: number | undefined;
}

const defaultMaxBytes = 1024 ** 3;
const defaultMaxEntries = 100_000;

/** What was made in the staging directory so far: a name's type decides what may go under it. */
type Made = "directory" | "file" | "symlink";

/**
 * Extracts a tar stream into `staging` (an empty directory), trusting nothing in it: names must
 * be relative without `..`; only directories, regular files, hard links to earlier files and
 * symbolic links that stay inside are accepted; parents must be directories this extraction
 * made; byte and entry caps hold. Throws `SandboxError` on the first entry that fails; what was
 * written by then stays in `staging` for the caller to remove.
 */
export async function extractArchive(
  source: AsyncIterable<Uint8Array>,
  staging: string,
  limits: ExtractLimits = {},
): Promise<ExtractedTree> {
  const maxBytes = limits.maxBytes ?? defaultMaxBytes;
  const maxEntries = limits.maxEntries ?? defaultMaxEntries;
  const made = new Map<string, Made>([["", "directory"]]);
  const symlinks: string[] = [];
  let bytes = 0;
  let entries = 0;
  const refuse = (name: string, why: string): SandboxError =>
    new SandboxError(`refused the archive from the sandbox: entry ${JSON.stringify(name)} ${why}`, {
      fix: "nothing was copied; remove the offending entry inside the sandbox and copy again",
    });

  const archive = extract();
  const closed = once(archive, "close").catch(() => undefined);
  const feeding = (async () => {
    for await (const chunk of source) {
      if (archive.destroyed) return;
      if (!archive.write(chunk)) await Promise.race([once(archive, "drain"), closed]);
    }
    if (!archive.destroyed) archive.end(undefined);
  })();
  feeding.catch(() => undefined);

  try {
    for await (const entry of archive) {
      const header = entry.header;
      const name = checkedName(header.name, refuse);
      if (name === "") {
        entry.resume();
        continue;
      }
      if (++entries > maxEntries) throw refuse(name, `is past the limit of ${maxEntries} entries`);
      if (made.has(name)) throw refuse(name, "appears twice");
      const parent = parentOf(name);
      await ensureParents(parent, made, staging, (why) => refuse(name, why));
      const destination = path.join(staging, name);
      switch (header.type) {
        case "directory":
          await mkdir(destination, { mode: (header.mode & 0o777) | 0o700 });
          made.set(name, "directory");
          entry.resume();
          break;
        case "file":
        case "contiguous-file": {
          if (bytes + header.size > maxBytes) {
            throw refuse(name, `is past the limit of ${maxBytes} bytes`);
          }
          bytes += header.size;
          await writeEntry(entry, destination, header.mode & 0o777);
          made.set(name, "file");
          break;
        }
        case "symlink": {
          const linkname = header.linkname;
          if (path.posix.isAbsolute(linkname) || linkname.includes("\0")) {
            throw refuse(name, `is a symbolic link to an absolute path (${linkname})`);
          }
          const resolved = path.posix.normalize(path.posix.join(parent, linkname));
          if (resolved === ".." || resolved.startsWith("../")) {
            throw refuse(name, `is a symbolic link leaving the tree (${linkname})`);
          }
          await symlink(linkname, destination);
          made.set(name, "symlink");
          symlinks.push(name);
          entry.resume();
          break;
        }
        case "link": {
          const source = checkedName(header.linkname, refuse);
          if (made.get(source) !== "file") {
            throw refuse(name, `is a hard link to ${JSON.stringify(source)}, not an earlier file`);
          }
          await link(path.join(staging, source), destination);
          made.set(name, "file");
          entry.resume();
          break;
        }
        default:
          throw refuse(name, `is a ${header.type}, which is never copied out`);
      }
    }
    await feeding;
  } finally {
    archive.destroy();
  }
  await checkSymlinksStayInside(staging, symlinks, refuse);
  return { entries, bytes };
}

function parentOf(name: string): string {
  const parent = path.posix.dirname(name);
  return parent === "." ? "" : parent;
}

/** A tar name as a clean relative path ("" for the root); anything else is refused. */
function checkedName(raw: string, refuse: (name: string, why: string) => SandboxError): string {
  if (raw.includes("\0")) throw refuse(raw, "has a NUL byte in its name");
  if (raw.startsWith("/")) throw refuse(raw, "has an absolute name");
  const parts = raw.split("/").filter((part) => part !== "" && part !== ".");
  if (parts.includes("..")) throw refuse(raw, "has a '..' in its name");
  return parts.join("/");
}

/** Parents must be directories this extraction made (made here when the archive skipped them). */
async function ensureParents(
  parent: string,
  made: Map<string, Made>,
  staging: string,
  refuse: (why: string) => SandboxError,
): Promise<void> {
  if (parent === "") return;
  const kind = made.get(parent);
  if (kind === "directory") return;
  if (kind !== undefined) throw refuse(`lies under ${JSON.stringify(parent)}, which is a ${kind}`);
  await ensureParents(parentOf(parent), made, staging, refuse);
  await mkdir(path.join(staging, parent), { mode: 0o755 });
  made.set(parent, "directory");
}

async function writeEntry(
  entry: AsyncIterable<unknown>,
  destination: string,
  mode: number,
): Promise<void> {
  // O_EXCL: never follows or overwrites anything already there.
  const handle = await open(
    destination,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    mode,
  );
  try {
    for await (const chunk of entry) await handle.write(chunk as Uint8Array);
  } finally {
    await handle.close();
  }
}

/**
 * Each symlink must resolve (on the host, now that the tree exists) inside the staging
 * directory. A chain of links can leave a tree that every single link stays inside lexically,
 * so this checks the real resolution; a dangling link must resolve inside as far as it exists
 * and have no `..` after that.
 */
async function checkSymlinksStayInside(
  staging: string,
  symlinks: readonly string[],
  refuse: (name: string, why: string) => SandboxError,
): Promise<void> {
  const root = await realpath(staging);
  const inside = (candidate: string): boolean =>
    candidate === root || candidate.startsWith(`${root}${path.sep}`);
  for (const name of symlinks) {
    const full = path.join(staging, name);
    try {
      if (!inside(await realpath(full)))
        throw refuse(name, "is a symbolic link that resolves outside the tree");
      continue;
    } catch (error) {
      if (error instanceof SandboxError) throw error;
    }
    const target = path.join(path.dirname(full), await readlink(full));
    let existing = target;
    const rest: string[] = [];
    while (existing !== path.dirname(existing)) {
      const found = await lstat(existing).then(
        () => true,
        () => false,
      );
      if (found) break;
      rest.unshift(path.basename(existing));
      existing = path.dirname(existing);
    }
    const resolved = await realpath(existing).catch(() => "");
    if (!inside(resolved) || rest.includes("..")) {
      throw refuse(name, "is a symbolic link that resolves outside the tree");
    }
  }
}
