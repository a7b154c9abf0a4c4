import { createHash } from "node:crypto";
import { constants } from "node:fs";
import { closeSync, fstatSync, openSync, readlinkSync, readSync } from "node:fs";
import { chmod, lchown, writeFile } from "node:fs/promises";
import path from "node:path";
import { setImmediate } from "node:timers/promises";
import { crc32, deflateSync, inflateSync } from "node:zlib";

import { throwIfAborted } from "../../common/index.js";
import type { Owner } from "./owner.js";
import { isInside } from "./paths.js";
import { isErrno } from "./tree-copy.js";

/**
 * A repository's loose objects, written into the copy as one pack and its index instead of one
 * file each (git-state.ts). A repository that was never `gc`'d keeps every object it made as a
 * file of its own: a young 600-file project with three commits has ~1,900, and creating them is
 * most of what seeding its `.git` costs — on this host and, more, in an engine volume (issue 29's
 * bench). Git reads a pack as it reads loose objects; the agent sees the same history.
 *
 * Done in this process, with no program: each object is read from the user's repository
 * (O_NOFOLLOW, and checked through /proc to lie inside it, as TreeCopier reads), inflated with a
 * size cap, its header parsed strictly, and its bytes hashed against its name — an object that is
 * not what its name says, too big, or unreadable this way is left for the caller to copy as a
 * file, as before, so git in the sandbox judges it as it would have. The pack and index are
 * written by the format git documents (gitformat-pack: pack v2, index v2), with the repository's
 * hash (SHA-1 or SHA-256).
 */

/** One loose object of the source: its path below the source root and its id (hex). */
export interface LooseObject {
  /** `.git/objects/ab/cdef…`, relative to the source root. */
  relative: string;
  id: string;
}

export interface PackLooseObjectsOptions {
  /** Real absolute path of the directory the objects are read from (nothing outside is read). */
  sourceRoot: string;
  objects: readonly LooseObject[];
  /** An existing directory of the copy (`.git/objects/pack`) the pack and index are written to. */
  targetDirectory: string;
  hash: "sha1" | "sha256";
  /** Owner of the files written (needs root); undefined keeps this process's owner. */
  owner: Owner | undefined;
  signal?: AbortSignal | undefined;
}

export interface PackedLooseObjects {
  /** Names written into `targetDirectory` (the pack, then its index); none when nothing was packed. */
  files: string[];
  /** Bytes of those files. */
  bytes: number;
  /** Objects not packed, for the caller to copy as files. */
  left: LooseObject[];
}

/** A loose object file bigger than this is copied as a file (it is one entry either way). */
const maxLooseFileBytes = 1024 * 1024;
/** Largest object content inflated: the cap that keeps a hostile zlib stream small. */
const maxObjectBytes = 16 * 1024 * 1024;
/** Most bytes one pack holds in memory; the objects past it are copied as files. */
const maxPackBytes = 64 * 1024 * 1024;
/**
 * Objects read and compressed between two turns of the event loop. Synchronously: each is a few
 * small system calls and microseconds of zlib, and a round trip through libuv's thread pool for
 * each step made the packing as slow as the copying it replaces.
 */
const batch = 64;

const typeNumbers = { commit: 1, tree: 2, blob: 3, tag: 4 } as const;
const hashBytes = { sha1: 20, sha256: 32 } as const;

/** One object as it goes into the pack. */
interface PackEntry {
  id: Buffer;
  /** The entry's bytes: type-and-size header, then the deflated content. */
  bytes: Buffer;
}

/** Packs what it can of `objects` (see the module comment). */
export async function packLooseObjects(
  options: PackLooseObjectsOptions,
): Promise<PackedLooseObjects> {
  const left: LooseObject[] = [];
  const entries: PackEntry[] = [];
  let packBytes = 0;
  for (const [at, object] of options.objects.entries()) {
    if (at % batch === 0) {
      // Between batches, the rest of the seed (the engine's upload) gets the event loop.
      throwIfAborted(options.signal, "workspace seeding");
      await setImmediate();
    }
    const entry = packBytes < maxPackBytes ? packEntryOf(object, options) : undefined;
    if (entry && packBytes + entry.bytes.byteLength <= maxPackBytes) {
      entries.push(entry);
      packBytes += entry.bytes.byteLength;
    } else {
      left.push(object);
    }
  }
  if (entries.length === 0) return { files: [], bytes: 0, left };

  const { pack, index, name } = writePack(entries, options.hash);
  const files = [`${name}.pack`, `${name}.idx`];
  // The pack before its index: git uses a pack only once its index is there.
  for (const [file, bytes] of [
    [files[0], pack],
    [files[1], index],
  ] as const) {
    const target = path.join(options.targetDirectory, file ?? "");
    await writeFile(target, bytes, { flag: "wx", mode: 0o444 });
    await chmod(target, 0o444);
    if (options.owner) await lchown(target, options.owner.uid, options.owner.gid);
  }
  return { files, bytes: pack.byteLength + index.byteLength, left };
}

/** The pack entry of one loose object; undefined when it is to be copied as a file instead. */
function packEntryOf(object: LooseObject, options: PackLooseObjectsOptions): PackEntry | undefined {
  const compressed = readInside(options.sourceRoot, object.relative);
  if (!compressed) return undefined;
  let raw: Buffer;
  try {
    raw = inflateSync(compressed, { maxOutputLength: maxObjectBytes + 64 });
  } catch {
    return undefined;
  }
  if (createHash(options.hash).update(raw).digest("hex") !== object.id) return undefined;
  // `<type> <decimal size>\0<content>`, the size exactly the content's.
  const nul = raw.indexOf(0);
  const header = /^(commit|tree|blob|tag) (0|[1-9][0-9]{0,9})$/.exec(
    raw.subarray(0, Math.max(nul, 0)).toString("latin1"),
  );
  if (nul < 0 || !header?.[1] || !header[2]) return undefined;
  const content = raw.subarray(nul + 1);
  if (Number(header[2]) !== content.byteLength) return undefined;
  const type = typeNumbers[header[1] as keyof typeof typeNumbers];
  // Level 1: the copy is written once, on this machine or its engine, and never sent on.
  const deflated = deflateSync(content, { level: 1 });
  return {
    id: Buffer.from(object.id, "hex"),
    bytes: Buffer.concat([entryHeader(type, content.byteLength), deflated]),
  };
}

/**
 * A regular file's bytes read through a descriptor that really lies inside `root`; undefined
 * when it is gone, not a regular file, too big, or outside (or there is no /proc to tell).
 */
function readInside(root: string, relative: string): Buffer | undefined {
  let fd: number;
  try {
    fd = openSync(
      path.join(root, relative),
      constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY,
    );
  } catch (error) {
    if (isErrno(error, "ENOENT") || isErrno(error, "ELOOP") || isErrno(error, "ENOTDIR")) {
      return undefined;
    }
    throw error;
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile() || stats.size > maxLooseFileBytes) return undefined;
    let real: string;
    try {
      real = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      return undefined;
    }
    if (!isInside(root, real)) return undefined;
    const bytes = Buffer.alloc(stats.size);
    const read = readSync(fd, bytes, 0, stats.size, 0);
    return bytes.subarray(0, read);
  } finally {
    closeSync(fd);
  }
}

/** A pack entry's header: the type in bits 6–4 of the first byte, the size 4 then 7 bits a byte. */
function entryHeader(type: number, size: number): Buffer {
  const bytes: number[] = [];
  let byte = (type << 4) | (size & 0x0f);
  let rest = Math.floor(size / 16);
  while (rest > 0) {
    bytes.push(byte | 0x80);
    byte = rest & 0x7f;
    rest = Math.floor(rest / 128);
  }
  bytes.push(byte);
  return Buffer.from(bytes);
}

/** The pack (v2) of `entries`, its index (v2), and its name (`pack-<checksum>`). */
function writePack(
  entries: PackEntry[],
  hash: "sha1" | "sha256",
): { pack: Buffer; index: Buffer; name: string } {
  const head = Buffer.alloc(12);
  head.write("PACK", 0, "latin1");
  head.writeUInt32BE(2, 4);
  head.writeUInt32BE(entries.length, 8);
  const offsets: number[] = [];
  let offset = head.byteLength;
  for (const entry of entries) {
    offsets.push(offset);
    offset += entry.bytes.byteLength;
  }
  const body = Buffer.concat([head, ...entries.map((entry) => entry.bytes)]);
  const checksum = createHash(hash).update(body).digest();
  const pack = Buffer.concat([body, checksum]);

  const order = entries.map((_, at) => at).sort((a, b) => compareIds(entries, a, b));
  const size = hashBytes[hash];
  const count = entries.length;
  // magic, version, fan-out, names, CRC-32s, 4-byte offsets (all below 2^31: maxPackBytes).
  const index = Buffer.alloc(8 + 256 * 4 + count * (size + 8));
  index.writeUInt32BE(0xff744f63, 0);
  index.writeUInt32BE(2, 4);
  const fanout = new Array<number>(256).fill(0);
  for (const entry of entries) fanout[entry.id[0] ?? 0] = (fanout[entry.id[0] ?? 0] ?? 0) + 1;
  let total = 0;
  for (let byte = 0; byte < 256; byte += 1) {
    total += fanout[byte] ?? 0;
    index.writeUInt32BE(total, 8 + byte * 4);
  }
  const names = 8 + 256 * 4;
  const crcs = names + count * size;
  const offsetTable = crcs + count * 4;
  order.forEach((at, position) => {
    const entry = entries[at] as PackEntry;
    entry.id.copy(index, names + position * size);
    index.writeUInt32BE(crc32(entry.bytes), crcs + position * 4);
    index.writeUInt32BE(offsets[at] ?? 0, offsetTable + position * 4);
  });
  const indexBody = Buffer.concat([index, checksum]);
  const indexChecksum = createHash(hash).update(indexBody).digest();
  return {
    pack,
    index: Buffer.concat([indexBody, indexChecksum]),
    name: `pack-${checksum.toString("hex")}`,
  };
}

function compareIds(entries: PackEntry[], a: number, b: number): number {
  return Buffer.compare((entries[a] as PackEntry).id, (entries[b] as PackEntry).id);
}
