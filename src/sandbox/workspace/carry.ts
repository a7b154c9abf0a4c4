import path from "node:path";

import { SandboxStartError } from "../../common/index.js";
import type { Owner } from "./owner.js";
import { CopyLimitError, TreeCopier, type CopySummary } from "./tree-copy.js";

/**
 * Carrying (`sandbox.carry`, `--carry`): git-ignored paths of the agent workspace — installed
 * dependencies such as `node_modules` or `.venv` — copied into a new seeded copy, so the tests run
 * without a network. Only at seeding, into the closed temporary directory no container can reach
 * yet, owned by the container's user (writable inside: vite writes `node_modules/.vite-temp`).
 *
 * Why a hostile carried tree cannot make the host reach outside the workspace: the copy goes
 * through `TreeCopier` like the rest of the seed — symlinks are recreated as links and never
 * followed, FIFOs, sockets and devices are skipped, each file is opened with O_NOFOLLOW and checked
 * to lie inside the workspace, no set-uid bit is copied. After seeding, the host never reads the
 * carried tree again: diffs leave it out (`recordBaseline`'s `leaveOut`), so host git does not even
 * descend into it.
 *
 * Not hardlinks: a hardlink is the host's own inode, so a write inside the sandbox would be a
 * write to the user's file (Linux has no copy-on-write for hardlinks). Reflinks are the
 * copy-on-write kind: tried first, and where the filesystem has none, files are copied.
 */

export interface CarryOptions {
  /** Real (symlink-resolved) agent workspace. */
  sourceRoot: string;
  /** The seed being built (closed to containers). */
  targetRoot: string;
  /** Workspace-relative, `/`-separated paths, none inside another (the plan's `spec.carry`). */
  paths: readonly string[];
  owner: Owner | undefined;
  /** Real paths never copied (cordon's state directory when it lies in the workspace). */
  exclude: readonly string[];
  /**
   * Most bytes the carried files may take (what is left of the disk budget); undefined: no limit.
   */
  byteLimit?: number | undefined;
  /** Gets a line for entries that were not carried (links out of the workspace, FIFOs…). */
  warnings: string[];
  signal?: AbortSignal | undefined;
}

/** What carrying did; shown on stderr and written to the seed marker. */
export interface CarrySummary {
  paths: string[];
  files: number;
  directories: number;
  symlinks: number;
  bytes: number;
  /**
   * "reflink": every file shares its blocks with the source until written; "copy": copied;
   * "layer": the directories are overlays of a snapshot shared by the run's copies (carry-layers.ts).
   */
  method: "reflink" | "copy" | "layer";
  /** With "layer": whether this copy made the shared snapshot or found it made. */
  snapshot?: "made" | "reused" | undefined;
  /** Wall time of the copy in milliseconds. */
  durationMs: number;
  skipped: CopySummary["skipped"];
}

/** Copies the carried paths into the seed. Paths gone since the plan was made are skipped. */
export async function carryInto(options: CarryOptions): Promise<CarrySummary> {
  const started = performance.now();
  const copier = new TreeCopier({
    sourceRoot: options.sourceRoot,
    targetRoot: options.targetRoot,
    owner: options.owner,
    exclude: [...options.exclude, path.join(options.sourceRoot, ".git")],
    clone: true,
    byteLimit: options.byteLimit,
    // Dependency trees are tens of thousands of small files: more of them in flight pays.
    concurrency: 32,
    signal: options.signal,
  });
  let copied: CopySummary;
  try {
    copied = await copier.copyEntries(options.paths);
  } catch (error) {
    if (error instanceof CopyLimitError) {
      throw new SandboxStartError(
        `the carried paths (${options.paths.join(", ")}) do not fit the private workspace's disk budget: ${error.path} would take them past ${Math.round(error.limit / 1024 ** 2)} MiB`,
        {
          fix: 'raise sandbox.disk (e.g. "20g"), or carry less (--carry, sandbox.carry)',
          cause: error,
        },
      );
    }
    throw error;
  }
  if (copied.skipped.length > 0) {
    options.warnings.push(
      `carrying skipped ${copied.skipped.length} entr${copied.skipped.length === 1 ? "y" : "ies"}: ${copied.skipped
        .slice(0, 5)
        .map((s) => `${s.path} (${s.reason})`)
        .join(", ")}`,
    );
  }
  return {
    paths: [...options.paths],
    files: copied.files,
    directories: copied.directories,
    symlinks: copied.symlinks,
    bytes: copied.bytes,
    method: copied.files > 0 && copied.cloned === copied.files ? "reflink" : "copy",
    durationMs: Math.round(performance.now() - started),
    skipped: copied.skipped,
  };
}

/** One line for stderr: what was carried, how big, how long, and how. */
export function describeCarry(summary: CarrySummary): string {
  const mebibytes = (summary.bytes / 1024 ** 2).toFixed(1);
  const seconds = (summary.durationMs / 1000).toFixed(2);
  const how = {
    reflink: "reflinked: blocks shared with the workspace until written",
    copy: "copied (no reflink on this filesystem)",
    layer:
      summary.snapshot === "made"
        ? "copied once for this run, mounted read-only beneath a private upper layer"
        : "the run's copy reused: mounted read-only beneath a private upper layer",
  }[summary.method];
  return `carried ${summary.paths.join(", ")}: ${summary.files} files, ${summary.symlinks} symlinks, ${mebibytes} MiB in ${seconds} s (${how})`;
}

/**
 * `info/exclude` lines that leave each carried path out, anchored at the workspace root and with
 * git's pattern characters escaped, so `node_modules` never matches `src/node_modules`.
 */
export function carryExcludePatterns(paths: readonly string[]): string[] {
  return paths.map(
    (entry) => `/${entry.replace(/[\\*?[]/g, (c) => `\\${c}`).replace(/ $/, "\\ ")}`,
  );
}
