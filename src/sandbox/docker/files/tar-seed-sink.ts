import { once } from "node:events";

import type { Pack } from "tar-stream";

import type { SeedSink, StreamedEntryHeader } from "../../workspace/index.js";
import { addEntry, type PackedTree } from "./tree-transfer.js";

export interface TarSeedSinkOptions {
  /** Put before every entry's name (`workspace/`). */
  prefix: string;
  /** The numeric owner every entry gets. */
  owner: { uid: number; gid: number };
  /** The sink's `open`: the seed directory's own entries are packed before any streamed one. */
  open: (directory: string) => Promise<void>;
}

/**
 * A streamed seed's entries (workspace/seed-stream.ts) as tar entries, in the order given, into
 * the archive a volume is filled from: each file's bytes pass through as they are read, owned by
 * the sandbox user, links as links.
 */
export class TarSeedSink implements SeedSink {
  /** What was packed (`PackedTree`'s terms), for the volume's disk bound. */
  readonly packed: PackedTree = { entries: 0, fileBytes: 0 };

  constructor(
    private readonly archive: Pack,
    private readonly options: TarSeedSinkOptions,
  ) {}

  open(directory: string): Promise<void> {
    return this.options.open(directory);
  }

  async directory(entry: StreamedEntryHeader): Promise<void> {
    await addEntry(this.archive, { ...this.#header(entry), type: "directory" });
    this.packed.entries += 1;
  }

  async symlink(entry: StreamedEntryHeader & { target: string }): Promise<void> {
    await addEntry(this.archive, {
      ...this.#header(entry),
      type: "symlink",
      linkname: entry.target,
    });
    this.packed.entries += 1;
  }

  async file(
    entry: StreamedEntryHeader & { size: number },
    content: AsyncIterable<Uint8Array>,
  ): Promise<void> {
    const header = { ...this.#header(entry), type: "file" as const, size: entry.size };
    const chunks = content[Symbol.asyncIterator]();
    const first = await chunks.next();
    if (first.done || first.value.byteLength === entry.size) {
      // One piece (a file read whole): packed at once.
      if (!(await chunks.next()).done) throw new Error(`${entry.path}: more bytes than its size`);
      await addEntry(this.archive, header, first.done ? new Uint8Array(0) : first.value);
    } else {
      let settle!: (error?: Error | null) => void;
      const done = new Promise<void>((resolve, reject) => {
        settle = (error) => (error ? reject(error) : resolve());
      });
      const stream = this.archive.entry(header, settle);
      const write = async (chunk: Uint8Array): Promise<void> => {
        if (!stream.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))) {
          await once(stream, "drain");
        }
      };
      await write(first.value);
      for (let next = await chunks.next(); !next.done; next = await chunks.next()) {
        await write(next.value);
      }
      stream.end(undefined);
      await done;
    }
    this.packed.entries += 1;
    this.packed.fileBytes += entry.size;
  }

  #header(entry: StreamedEntryHeader) {
    return {
      name: `${this.options.prefix}${entry.path}`,
      mode: entry.mode,
      mtime: entry.mtime,
      uid: this.options.owner.uid,
      gid: this.options.owner.gid,
    };
  }
}
