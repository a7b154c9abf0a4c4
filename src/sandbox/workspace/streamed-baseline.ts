import { once } from "node:events";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";

import { SandboxError } from "../../common/index.js";
import {
  baselineIdentity,
  baselineMessage,
  baselineRef,
  fastObjects,
  prepareBaselineGitDir,
} from "./baseline.js";
import type { RepositoryFormat } from "./git-state.js";
import { HostGitError, runHostGit, spawnHostGit, type StreamingHostGit } from "./host-git.js";

/** Git's file modes in a tree. */
type BlobMode = "100644" | "100755" | "120000";

interface RecordedEntry {
  path: string;
  mode: BlobMode;
  mark: number;
}

/** The commit's mark; blobs count up from 2. */
const commitMark = 1;

/** Where git reads ignore rules from, in every directory of the work tree. */
const ignoreFileName = ".gitignore";

/**
 * The baseline of a seed whose files are streamed (seed-stream.ts) rather than copied into a
 * directory: recorded from the very bytes the copy gets, as they go by, so a file the user changes
 * meanwhile cannot make the two disagree. It holds what `recordBaseline` over the same tree would:
 *
 * - Each file's bytes go to `git fast-import` as a blob (the bytes as they are: no filter, no
 *   attribute reaches fast-import), links as their text; the commit names each with git's mode
 *   (100755 when the owner may execute it, as `git add` records it).
 * - What the copy's ignore rules leave out of `git add -A` is left out of the commit: `git
 *   check-ignore --no-index` (every path counts as untracked, as in the baseline's fresh index)
 *   over a scratch tree holding only the copy's `.gitignore` files, written from the bytes
 *   streamed, with the baseline's own `info/exclude` (the copy's). Same rule files, same git code
 *   deciding them.
 *
 * Neither git reads the user's repository or any tree a container reaches: fast-import reads its
 * stdin, check-ignore cordon's scratch tree; both run closed off as every host git (host-git.ts).
 */
export class StreamedBaseline {
  readonly #entries: RecordedEntry[] = [];
  readonly #ignoreFiles = new Map<string, Buffer>();
  #nextMark = commitMark + 1;
  #failed: Error | undefined;

  private constructor(
    private readonly gitDir: string,
    private readonly scratch: string,
    private readonly git: StreamingHostGit,
  ) {}

  /**
   * Makes `gitDir` (as `recordBaseline` would for the seed at `workspace`, whose `.git` must be
   * complete: its format and `info/exclude` are read) and starts fast-import into it.
   */
  static async start(
    workspace: string,
    options: { gitDir: string; format: RepositoryFormat; signal?: AbortSignal | undefined },
  ): Promise<StreamedBaseline> {
    await prepareBaselineGitDir(workspace, { gitDir: options.gitDir, format: options.format });
    const scratch = `${options.gitDir}.rules`;
    await rm(scratch, { recursive: true, force: true });
    await mkdir(scratch, { mode: 0o700 });
    const git = spawnHostGit(
      [
        ...fastObjects,
        "-c",
        "pack.compression=1",
        // Every blob streamed into the pack as it comes, never held whole or deltified.
        "-c",
        "core.bigFileThreshold=1",
        // However few objects, a pack: never `unpack-objects` into a loose file each.
        "-c",
        "fastimport.unpackLimit=0",
        "fast-import",
        "--quiet",
        "--done",
        `--export-marks=${path.join(scratch, "marks")}`,
      ],
      { gitDir: options.gitDir, signal: options.signal },
    );
    return new StreamedBaseline(options.gitDir, scratch, git);
  }

  /**
   * A file of the copy at `relative` (`/`-separated), `size` bytes, its permission bits `mode`:
   * its content is given to the writer returned, exactly `size` bytes, then `end()`.
   */
  async file(relative: string, mode: number, size: number): Promise<BlobWriter> {
    const mark = await this.#blobHeader(size);
    this.#entries.push({ path: relative, mode: mode & 0o100 ? "100755" : "100644", mark });
    const ignoreRules: Buffer[] | undefined =
      path.posix.basename(relative) === ignoreFileName ? [] : undefined;
    return {
      write: async (chunk) => {
        ignoreRules?.push(Buffer.from(chunk));
        await this.#write(chunk);
      },
      end: async () => {
        if (ignoreRules) this.#ignoreFiles.set(relative, Buffer.concat(ignoreRules));
        await this.#write("\n");
      },
    };
  }

  /** A symbolic link of the copy at `relative`, pointing at `target` (its text). */
  async symlink(relative: string, target: string): Promise<void> {
    const text = Buffer.from(target);
    const mark = await this.#blobHeader(text.byteLength);
    this.#entries.push({ path: relative, mode: "120000", mark });
    await this.#write(text);
    await this.#write("\n");
  }

  /** Commits what was given, less what the copy's ignore rules leave out; the commit's id. */
  async finish(signal?: AbortSignal): Promise<string> {
    try {
      const ignored = await this.#ignored(signal);
      const message = Buffer.from(`${baselineMessage}\n`);
      const when = `${Math.floor(Date.now() / 1000)} +0000`;
      const identity = `${baselineIdentity.GIT_COMMITTER_NAME} <${baselineIdentity.GIT_COMMITTER_EMAIL}>`;
      await this.#write(
        `commit ${baselineRef}\nmark :${commitMark}\ncommitter ${identity} ${when}\ndata ${message.byteLength}\n`,
      );
      await this.#write(message);
      const lines = this.#entries
        .filter((entry) => !ignored.has(entry.path))
        .map((entry) => `M ${entry.mode} :${entry.mark} ${quotedPath(entry.path)}\n`);
      await this.#write(`${lines.join("")}\ndone\n`);
      this.git.stdin.end();
      await this.#exited();
      const marks = await readFile(path.join(this.scratch, "marks"), "utf8");
      const commit = new RegExp(`^:${commitMark} ([0-9a-f]{40,64})$`, "m").exec(marks)?.[1];
      if (!commit) throw new SandboxError("git fast-import recorded no baseline commit");
      return commit;
    } catch (error) {
      this.git.kill();
      throw this.#failure(error);
    } finally {
      await rm(this.scratch, { recursive: true, force: true });
    }
  }

  /** Stops recording (the seed failed); the git dir is the caller's to remove. */
  async abort(): Promise<void> {
    this.git.kill();
    await this.git.exited.catch(() => undefined);
    await rm(this.scratch, { recursive: true, force: true });
  }

  async #blobHeader(size: number): Promise<number> {
    const mark = this.#nextMark;
    this.#nextMark += 1;
    await this.#write(`blob\nmark :${mark}\ndata ${size}\n`);
    return mark;
  }

  async #write(data: string | Uint8Array): Promise<void> {
    if (this.#failed) throw this.#failed;
    if (!this.git.stdin.write(data)) {
      // Drained, or git gone (its exit says why).
      const gone = this.git.exited.then(
        () => new SandboxError("git fast-import stopped reading the seed"),
        (error: unknown) => this.#failure(error),
      );
      const outcome = await Promise.race([once(this.git.stdin, "drain"), gone]);
      if (outcome instanceof Error) {
        this.#failed = outcome;
        throw outcome;
      }
    }
  }

  async #exited(): Promise<void> {
    await this.git.exited;
  }

  /**
   * The recorded paths `git add -A` would leave out of the seed: ignored by its `.gitignore`
   * files or the baseline's `info/exclude`. None when there are no rules.
   */
  async #ignored(signal: AbortSignal | undefined): Promise<Set<string>> {
    const exclude = await readFile(path.join(this.gitDir, "info", "exclude")).catch(() =>
      Buffer.alloc(0),
    );
    if (this.#ignoreFiles.size === 0 && exclude.toString("utf8").trim() === "") return new Set();
    for (const [relative, bytes] of this.#ignoreFiles) {
      // Relative paths of the seed's plan: plain names, never `..` (seed-stream.ts).
      const file = path.join(this.scratch, "tree", ...relative.split("/"));
      await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
      await writeFile(file, bytes, { flag: "wx", mode: 0o600 });
    }
    await mkdir(path.join(this.scratch, "tree"), { recursive: true, mode: 0o700 });
    let output: Buffer;
    try {
      output = await runHostGit(["check-ignore", "--no-index", "--stdin", "-z"], {
        gitDir: this.gitDir,
        workTree: path.join(this.scratch, "tree"),
        stdin: Buffer.from(this.#entries.map((entry) => `${entry.path}\0`).join("")),
        // Each path is taken as it is (check-ignore matches no wildcard); a name that could read
        // as pathspec magic (a leading `:`) is never streamed (seed-stream.ts).
        maxBuffer: 1024 ** 3,
        signal,
      });
    } catch (error) {
      // Status 1: nothing is ignored.
      if (error instanceof HostGitError && error.exitCode === 1 && error.stderr === "") {
        return new Set();
      }
      throw error;
    }
    return new Set(
      output
        .toString("utf8")
        .split("\0")
        .filter((entry) => entry !== ""),
    );
  }

  #failure(error: unknown): Error {
    if (error instanceof SandboxError) return error;
    return new SandboxError(
      `cannot record the baseline of the seed: ${error instanceof Error ? error.message : String(error)}`,
      {
        fix: "check that git works on the host (`git --version`), or set sandbox.seed to false",
        cause: error,
      },
    );
  }
}

/** Where a file's content goes (`StreamedBaseline.file`). */
export interface BlobWriter {
  write(chunk: Uint8Array): Promise<void>;
  end(): Promise<void>;
}

/**
 * A path as fast-import reads it: C-style quoted, so a newline, a quote or a leading `"` in a
 * name is only ever part of that name (bytes at 0x80 and above go as they are, UTF-8).
 */
export function quotedPath(relative: string): string {
  let quoted = '"';
  for (const character of relative) {
    const code = character.codePointAt(0) ?? 0;
    if (character === '"' || character === "\\") quoted += `\\${character}`;
    else if (code < 0x20 || code === 0x7f) quoted += `\\${code.toString(8).padStart(3, "0")}`;
    else quoted += character;
  }
  return `${quoted}"`;
}
