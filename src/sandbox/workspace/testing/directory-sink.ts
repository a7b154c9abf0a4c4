import { chmod, mkdir, symlink, utimes, writeFile } from "node:fs/promises";
import path from "node:path";

import type { SeedSink, StreamedEntryHeader } from "../seed-stream.js";

/**
 * A `SeedSink` that makes what it is sent in a directory, as the engine extracts the tar into a
 * volume (mode, time, links as links), so a test can compare a streamed seed with a copied one
 * file by file. Records the order of calls.
 */
export class DirectorySeedSink implements SeedSink {
  /** `open` once, then one `directory`/`symlink`/`file` line per entry, in order. */
  readonly calls: string[] = [];
  /** The seed directory `open` was given. */
  opened: string | undefined;

  constructor(
    readonly root: string,
    private readonly hooks: {
      /** Called with each file's path after its first chunk was taken (an attack's moment). */
      afterFirstChunk?: (relative: string) => Promise<void>;
    } = {},
  ) {}

  async open(directory: string): Promise<void> {
    this.calls.push("open");
    this.opened = directory;
    await mkdir(this.root, { recursive: true });
  }

  async directory(entry: StreamedEntryHeader): Promise<void> {
    this.calls.push(`directory ${entry.path}`);
    await mkdir(this.#at(entry.path), { mode: entry.mode });
    await chmod(this.#at(entry.path), entry.mode);
  }

  async symlink(entry: StreamedEntryHeader & { target: string }): Promise<void> {
    this.calls.push(`symlink ${entry.path}`);
    await symlink(entry.target, this.#at(entry.path));
  }

  async file(
    entry: StreamedEntryHeader & { size: number },
    content: AsyncIterable<Uint8Array>,
  ): Promise<void> {
    this.calls.push(`file ${entry.path}`);
    const chunks: Uint8Array[] = [];
    for await (const chunk of content) {
      chunks.push(chunk);
      if (chunks.length === 1) await this.hooks.afterFirstChunk?.(entry.path);
    }
    const data = Buffer.concat(chunks);
    if (data.byteLength !== entry.size) {
      throw new Error(`${entry.path}: ${data.byteLength} bytes sent for a size of ${entry.size}`);
    }
    await writeFile(this.#at(entry.path), data, { flag: "wx" });
    await chmod(this.#at(entry.path), entry.mode);
    await utimes(this.#at(entry.path), entry.mtime, entry.mtime);
  }

  #at(relative: string): string {
    return path.join(this.root, ...relative.split("/"));
  }
}
