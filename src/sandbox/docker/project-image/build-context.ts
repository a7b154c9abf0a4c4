import type { Hash } from "node:crypto";
import { constants, createReadStream } from "node:fs";
import { lstat, open, readdir, readlink, realpath } from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";

import createDockerignore from "@balena/dockerignore";
import { pack } from "tar-stream";

import { ImageError, throwIfAborted } from "../../../common/index.js";
import { isInside, TreeCopier } from "../../workspace/index.js";

/** The most a Dockerfile, devcontainer.json or .dockerignore may hold. */
const maxDescriptorBytes = 1024 * 1024;

/** Where cordon puts the Dockerfile in the context it sends (its own name, so none is shadowed). */
export const contextDockerfileName = ".cordon-project.Dockerfile";

/**
 * Reads one small file of the workspace without following a link anywhere on the way: opened
 * with O_NOFOLLOW, and the descriptor's real path (through /proc/self/fd) must be the path as
 * written, which a symlinked parent directory would change (the workspace is a real path).
 */
export async function readWorkspaceFile(
  workspace: string,
  file: string,
  what: string,
): Promise<Buffer> {
  if (!isInside(workspace, file)) {
    throw new ImageError(`${what} ${file} is outside the workspace ${workspace}`, {
      fix: "name a file inside the workspace",
    });
  }
  let handle;
  try {
    handle = await open(
      file,
      constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY,
    );
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ImageError(
      code === "ELOOP"
        ? `${what} ${file} is a symbolic link; cordon reads only the workspace's own files`
        : `cannot read ${what} ${file} (${code ?? String(error)})`,
      { fix: "create it as a regular file in the workspace", cause: error },
    );
  }
  try {
    const stats = await handle.stat();
    const real = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => realpath(file));
    if (!stats.isFile() || real !== file) {
      throw new ImageError(
        `${what} ${file} is not a regular file of the workspace (it resolves to ${real})`,
        { fix: "make it a regular file, with no symbolic link on the way" },
      );
    }
    if (stats.size > maxDescriptorBytes) {
      throw new ImageError(`${what} ${file} is larger than ${maxDescriptorBytes} bytes`, {
        fix: "make it smaller",
      });
    }
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

/** One entry of a build context snapshot, in the order it is hashed and sent. */
interface ContextEntry {
  /** `/`-separated, relative to the context. */
  name: string;
  type: "file" | "directory" | "symlink";
  mode: number;
  size: number;
  linkname?: string | undefined;
}

export interface ContextSnapshotOptions {
  workspace: string;
  /** The context directory (absolute, inside the workspace). */
  context: string;
  /** An empty private directory the context is copied into. */
  into: string;
  signal?: AbortSignal | undefined;
}

/**
 * A private copy of a build context, taken once: what is hashed is exactly what is sent, and no
 * process in a sandbox can change it in between. The copy honours the context's .dockerignore
 * (Docker's own matcher, @balena/dockerignore) and never reads outside the context: symlinks are
 * copied as links (their text only: the engine resolves them inside the context, never on the
 * host), and TreeCopier opens every file with O_NOFOLLOW and checks where it really lies.
 */
export class ContextSnapshot {
  private constructor(
    readonly root: string,
    private readonly entries: ContextEntry[],
    /** Paths left out because they could not be copied safely (links on the way, devices). */
    readonly skipped: { path: string; reason: string }[],
  ) {}

  static async take(options: ContextSnapshotOptions): Promise<ContextSnapshot> {
    const { workspace, context, into, signal } = options;
    const real = await realpath(context).catch((error: unknown) => {
      throw new ImageError(`the build context ${context} does not exist`, {
        fix: "create it, or name another context",
        cause: error,
      });
    });
    if (real !== context || !isInside(workspace, real)) {
      throw new ImageError(
        `the build context ${context} is reached through a symbolic link (it resolves to ${real}); cordon sends only the workspace's own files`,
        { fix: "name the real directory inside the workspace" },
      );
    }
    // A CommonJS module whose typings declare an ES default export: called as what Node gives.
    const ignore = (createDockerignore as unknown as typeof createDockerignore.default)({
      ignorecase: false,
    });
    const ignoreFile = path.join(context, ".dockerignore");
    const hasIgnoreFile = await lstat(ignoreFile).then(
      () => true,
      () => false,
    );
    let negations = false;
    if (hasIgnoreFile) {
      const patterns = (await readWorkspaceFile(workspace, ignoreFile, "the .dockerignore"))
        .toString("utf8")
        .split(/\r?\n/)
        .map((line) => line.trim())
        .filter((line) => line !== "" && !line.startsWith("#"));
      negations = patterns.some((pattern) => pattern.startsWith("!"));
      ignore.add(patterns);
    }
    // The names to copy: every file and link not ignored; a directory ignored as a whole is not
    // even entered unless a `!` pattern might bring something below it back.
    const wanted: string[] = [];
    const walk = async (relative: string): Promise<void> => {
      throwIfAborted(signal, "reading the build context");
      const entries = await readdir(path.join(context, relative), { withFileTypes: true });
      for (const entry of entries) {
        const name = relative === "" ? entry.name : `${relative}/${entry.name}`;
        const ignored = ignore.ignores(name);
        if (entry.isDirectory()) {
          if (ignored && !negations) continue;
          await walk(name);
        } else if (!ignored) {
          wanted.push(name);
        }
      }
    };
    await walk("");
    const copier = new TreeCopier({ sourceRoot: context, targetRoot: into, signal });
    const summary = await copier.copyEntries(wanted.sort());
    return new ContextSnapshot(into, await listTree(into), summary.skipped);
  }

  /** Feeds every entry (name, type, mode, content or link text) into `hash`, in a fixed order. */
  async hashInto(hash: Hash): Promise<void> {
    for (const entry of this.entries) {
      hash.update(`${entry.type} ${entry.mode.toString(8)} ${JSON.stringify(entry.name)}`);
      if (entry.type === "symlink") hash.update(` -> ${JSON.stringify(entry.linkname)}`);
      if (entry.type === "file") {
        hash.update(` ${entry.size}:`);
        await pipeline(createReadStream(path.join(this.root, entry.name)), async (source) => {
          for await (const chunk of source) hash.update(chunk as Buffer);
        });
      }
      hash.update("\n");
    }
  }

  /** The context as the tar stream the engine reads, with the Dockerfile under its own name. */
  tar(dockerfile: Buffer): Readable {
    const archive = pack();
    const fill = async (): Promise<void> => {
      for (const entry of this.entries) {
        if (entry.name === contextDockerfileName) continue;
        const header = { name: entry.name, mode: entry.mode, mtime: new Date(0) };
        if (entry.type === "directory") archive.entry({ ...header, type: "directory" });
        else if (entry.type === "symlink") {
          archive.entry({ ...header, type: "symlink", linkname: entry.linkname ?? "" });
        } else {
          await new Promise<void>((resolve, reject) => {
            const sink = archive.entry({ ...header, size: entry.size }, (error) =>
              error ? reject(error) : resolve(),
            );
            createReadStream(path.join(this.root, entry.name)).on("error", reject).pipe(sink);
          });
        }
      }
      archive.entry({ name: contextDockerfileName, mode: 0o644, mtime: new Date(0) }, dockerfile);
      archive.finalize();
    };
    fill().catch((error: unknown) => archive.destroy(error as Error));
    // tar-stream packs are streamx streams; Readable.from makes a Node stream of one for the engine client.
    return Readable.from(archive);
  }
}

/** Every entry below `root`, sorted by name; links are listed, never followed. */
async function listTree(root: string): Promise<ContextEntry[]> {
  const entries: ContextEntry[] = [];
  const visit = async (relative: string): Promise<void> => {
    const names = (await readdir(path.join(root, relative))).sort();
    for (const name of names) {
      const child = relative === "" ? name : `${relative}/${name}`;
      const absolute = path.join(root, child);
      const stats = await lstat(absolute);
      const mode = stats.mode & 0o777;
      if (stats.isDirectory()) {
        entries.push({ name: child, type: "directory", mode, size: 0 });
        await visit(child);
      } else if (stats.isSymbolicLink()) {
        const linkname = await readlink(absolute);
        entries.push({ name: child, type: "symlink", mode, size: 0, linkname });
      } else if (stats.isFile()) {
        entries.push({ name: child, type: "file", mode, size: stats.size });
      }
    }
  };
  await visit("");
  return entries;
}

/** sha256 of `parts` in order, each framed so no two sequences hash alike. */
export function hashParts(hash: Hash, parts: readonly (string | Buffer)[]): Hash {
  for (const part of parts) {
    const bytes = typeof part === "string" ? Buffer.from(part) : part;
    hash.update(`${bytes.length}:`).update(bytes).update("\n");
  }
  return hash;
}
