import {
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  realpath,
  rename,
  rm,
  stat,
  writeFile,
  lchown,
  chmod,
} from "node:fs/promises";
import type { Stats } from "node:fs";
import os from "node:os";
import path from "node:path";

import { SandboxStartError, throwIfAborted } from "../../common/index.js";
import type { SandboxSpec } from "../spec.js";
import { recordBaseline } from "./baseline.js";
import { carryInto, type CarrySummary } from "./carry.js";
import {
  attachCarryLayers,
  carryLayerRefusal,
  ensureCarrySnapshot,
  layeredPaths,
  makeMountPoints,
  mountCarryLayers,
} from "./carry-layers.js";
import { attachWorkspaceDisk, workspaceDiskFor } from "./disk-budget.js";
import { listGitFiles } from "./git-files.js";
import { SecretFilter, describeLeftOut } from "./secret-paths.js";
import {
  copySanitizedGitDir,
  defaultRepositoryFormat,
  findRepository,
  type RepositoryFormat,
  writeFreshRepository,
  writeListingGitDir,
} from "./git-state.js";
import { parseContainerUser, permissionsFor, processUid, type Owner } from "./owner.js";
import { baselineGitDir, isInside, seedMarkerPath, seedTempPrefix } from "./paths.js";
import { TreeCopier, isErrno, type CopySummary } from "./tree-copy.js";
import { planStreamedSeed, streamSeed, type SeedSink } from "./seed-stream.js";
import { StreamedBaseline } from "./streamed-baseline.js";
import { isAlive } from "./process-alive.js";
import { joinDigests, SourceFingerprint } from "./source-fingerprint.js";

export interface PrivateWorkspaceOptions {
  /** The state directory (`CORDON_HOME`); the private workspace must lie below it. */
  stateDirectory: string;
  /**
   * Take the source's fingerprint before copying it (`SeedInfo.sourceFingerprint`): for a warm
   * pool member, whose copy is handed over later only if the source still has it.
   */
  fingerprint?: boolean | undefined;
  signal?: AbortSignal | undefined;
}

/** How a private workspace was seeded (also written to its seed marker). */
export interface SeedInfo {
  /** The agent workspace it was copied from. */
  source: string;
  /** "git": tracked + untracked-not-ignored files and `.git`; "copy": every file. */
  method: "git" | "copy";
  seededAt: string;
  /** Files copied, the repository's own `.git` among them (`gitDirFiles` of them). */
  files: number;
  symlinks: number;
  bytes: number;
  /** How many of `files` are the copied `.git`'s (a repository of its own); 0 otherwise. */
  gitDirFiles?: number | undefined;
  skipped: CopySummary["skipped"];
  /** False when the workspace is in no git repository (it was copied whole, secrets aside). */
  repository?: boolean | undefined;
  /** Secret-shaped paths left out (secret-paths.ts); directories end with `/`. */
  leftOut?: string[] | undefined;
  /** What `spec.carry` brought in besides the seed (never part of a diff). */
  carried?: CarrySummary | undefined;
  /**
   * The source's fingerprint (source-fingerprint.ts) taken before it was copied, when asked for
   * and the source is a repository of its own or none.
   */
  sourceFingerprint?: string | undefined;
}

export interface PrivateWorkspace {
  /** Absolute host path (mounted at /workspace). */
  path: string;
  /** True when this call created it. */
  created: boolean;
  /** Set when this call seeded it. */
  seed?: SeedInfo | undefined;
  /** Things the user should know (ownership, a `.git` that could not be copied). */
  warnings: string[];
}

/**
 * Makes sure the private workspace of a `none` or `ro` sandbox exists: created (parents 0700)
 * under the state directory or a configured `sandbox.workspaceRoot`, owned by the container's user
 * so the non-root user can work in it, and — when `spec.seed` and it is new — filled with a copy
 * of the agent workspace, with its baseline recorded in a git dir of cordon's own beside it.
 *
 * Ownership is decided before any container can reach the copy, never repaired after: the seed is
 * built in a temporary sibling made mode 0700 (no container and no other user can enter it),
 * everything in it is created owned by the container's user, and only then is the temporary root
 * itself given to that user, opened (0755) and renamed into place. So seeding happens once, a
 * crash mid-seed leaves nothing that looks finished, and no host chown ever runs over a tree a
 * container process could be changing. The user's own workspace is only ever read.
 */
export async function ensurePrivateWorkspace(
  spec: SandboxSpec,
  options: PrivateWorkspaceOptions,
): Promise<PrivateWorkspace> {
  const target = await validatedTarget(spec, options.stateDirectory);
  const warnings: string[] = [];
  const owner = ownerToApply(spec);

  const existing = await lstat(target).catch((error: unknown) => {
    if (isErrno(error, "ENOENT")) return undefined;
    throw error;
  });
  if (existing) {
    if (!existing.isDirectory()) {
      throw new SandboxStartError(`the private workspace ${target} is not a directory`, {
        fix: `remove it (\`cordon sandbox rm ${spec.containerName}\` or rm it by hand) and retry`,
      });
    }
    await attachWorkspaceDisk(target, { diskBytes: spec.diskBytes, warnings });
    await attachCarryLayers(target, warnings);
    // Stat again: with a disk budget the container gets the mounted image's root.
    refuseUnwritable(target, await handedOverStats(target, spec, options.signal), spec);
    return { path: target, created: false, warnings };
  }

  throwIfAborted(options.signal, "preparing the private workspace");
  // sandbox.disk: a bounded filesystem image mounted at the target, else a plain directory.
  const disk = await workspaceDiskFor(spec.diskBytes, warnings);
  if (!spec.seed) {
    if (disk) return { path: target, created: await disk.install(target, { owner }), warnings };
    try {
      await mkdir(target, { mode: 0o755 });
    } catch (error) {
      // Another process made it first: same spec, same result.
      if (isErrno(error, "EEXIST")) return { path: target, created: false, warnings };
      throw error;
    }
    // Empty, and no container has it mounted yet.
    if (owner) await lchown(target, owner.uid, owner.gid);
    return { path: target, created: true, warnings };
  }
  await removeAbandonedSeeds(target);
  // mkdtemp makes it 0700 and ours: closed until everything inside is made and owned.
  const temporary = await mkdtemp(`${seedTempPrefix(target)}${process.pid}-`);
  const baselineTemporary = `${temporary}.baseline.git`;
  try {
    const { seed, format } = await seedInto(temporary, spec, {
      owner,
      // Where cordon keeps its own things may lie inside the workspace: never copy a copy.
      exclude: [await realpath(options.stateDirectory), path.dirname(target)],
      warnings,
      signal: options.signal,
      fingerprint: options.fingerprint === true,
    });
    let layered: Layered | undefined;
    if (spec.carry?.length) {
      const carry = {
        sourceRoot: await realpath(spec.agentWorkspace),
        owner,
        exclude: [await realpath(options.stateDirectory), path.dirname(target)],
        warnings,
        signal: options.signal,
      };
      layered = await layerCarry(spec, temporary, {
        ...carry,
        shareKey: spec.carryShare ?? path.basename(target),
        byteLimit: disk ? Math.max(0, disk.bytes - seed.bytes) : undefined,
      });
      const rest = spec.carry.filter((entry) => !layered?.paths.includes(entry));
      if (rest.length > 0) {
        seed.carried = await carryInto({
          ...carry,
          targetRoot: temporary,
          paths: rest,
          byteLimit: disk ? Math.max(0, disk.bytes - seed.bytes) : undefined,
        });
      }
      if (layered) {
        const copied = seed.carried;
        seed.carried = layered.summary;
        if (copied) {
          seed.carried.files += copied.files;
          seed.carried.bytes += copied.bytes;
          seed.carried.skipped = [...seed.carried.skipped, ...copied.skipped];
        }
      }
    }
    // Before the agent ever sees the copy: what `cordon diff` compares against.
    await recordBaseline(temporary, {
      gitDir: baselineTemporary,
      format,
      leaveOut: spec.carry,
      signal: options.signal,
    });
    await writeFile(seedMarkerPath(target), `${JSON.stringify(seed, null, 2)}\n`, { mode: 0o600 });
    if (owner) await lchown(temporary, owner.uid, owner.gid);
    await chmod(temporary, 0o755);
    if (!(await installBaseline(baselineTemporary, target))) {
      return { path: target, created: false, warnings };
    }
    if (disk) {
      const created = await disk.install(target, {
        from: temporary,
        owner,
        signal: options.signal,
      });
      if (!created) return { path: target, created, warnings };
    } else {
      try {
        await rename(temporary, target);
      } catch (error) {
        // Another process finished seeding first; its copy is as good as ours.
        if (isErrno(error, "ENOTEMPTY") || isErrno(error, "EEXIST")) {
          return { path: target, created: false, warnings };
        }
        throw error;
      }
    }
    if (layered && seed.carried) {
      // Before any container can have the copy: the mounts go where the seed made them.
      const mountedMs = await mountCarryLayers(target, {
        snapshot: layered.snapshot,
        layers: layered.paths,
        owner,
        diskBytes: disk ? spec.diskBytes : undefined,
        warnings,
      });
      seed.carried.durationMs += mountedMs;
    }
    return { path: target, created: true, seed, warnings };
  } finally {
    await rm(temporary, { recursive: true, force: true });
    await rm(baselineTemporary, { recursive: true, force: true });
  }
}

/** A seed built in a closed directory of this host, not yet anywhere a container can reach. */
export interface ClosedSeed {
  /**
   * The copy (mode 0700, this process's own); only its `.git` when the work tree's files went to
   * `seedClosedCopy`'s `sink` instead.
   */
  directory: string;
  /** Its baseline git dir (`recordBaseline`). */
  baselineGitDir: string;
  /** The baseline commit (`refs/cordon/baseline`). */
  baselineCommit: string;
  seed: SeedInfo;
  /** Deletes both directories. */
  dispose(): Promise<void>;
}

/**
 * Seeds a copy of `spec.agentWorkspace` exactly as `ensurePrivateWorkspace` does (the files git
 * lists, the sanitized `.git`, secrets left out, carried paths copied in, the baseline recorded),
 * in a temporary 0700 directory beside `spec.privateWorkspace` that no container ever mounts, for
 * a caller that moves it elsewhere (a volume on the engine: docker/workspace-volumes.ts). Files
 * stay this process's own: the caller gives them their owner on the way. Nothing is created at
 * `spec.privateWorkspace` itself.
 */
export async function seedClosedCopy(
  spec: SandboxSpec,
  options: PrivateWorkspaceOptions & {
    warnings: string[];
    /**
     * Told of entries of the seed as they are copied (`TreeCopierOptions.onCopied`): the seed
     * directory and a path relative to it. Not every entry is told (cordon's own `.git/config`,
     * a fresh repository, carried paths), and none is final until this returns.
     */
    onCopied?: ((directory: string, relative: string) => void) | undefined;
    /**
     * Told once the seed directory's tree is final, before its baseline is recorded (which only
     * reads it): a caller streaming it can finish the stream while the baseline is made.
     */
    onTreeComplete?: ((directory: string) => void) | undefined;
    /**
     * Where the work tree's files go when they can be streamed (seed-stream.ts): read from the
     * agent workspace once, sent here and into the baseline at once, never copied into the seed
     * directory (which then holds only `.git`). Where they cannot (no repository of its own,
     * carried paths, a nested repository…), they are copied as without it, and never sent.
     */
    sink?: SeedSink | undefined;
  },
): Promise<ClosedSeed> {
  const target = await validatedTarget(spec, options.stateDirectory);
  await removeAbandonedSeeds(target);
  const directory = await mkdtemp(`${seedTempPrefix(target)}${process.pid}-`);
  const baseline = `${directory}.baseline.git`;
  const dispose = async (): Promise<void> => {
    await rm(directory, { recursive: true, force: true });
    await rm(baseline, { recursive: true, force: true });
  };
  try {
    const exclude = [await realpath(options.stateDirectory), path.dirname(target)];
    const onCopied = options.onCopied;
    const {
      seed,
      format,
      baselineCommit: streamedCommit,
    } = await seedInto(directory, spec, {
      owner: undefined,
      exclude,
      warnings: options.warnings,
      signal: options.signal,
      fingerprint: options.fingerprint === true,
      onCopied: onCopied && ((relative) => onCopied(directory, relative)),
      stream: options.sink && { sink: options.sink, baselineGitDir: baseline },
    });
    if (streamedCommit !== undefined) {
      options.onTreeComplete?.(directory);
      return { directory, baselineGitDir: baseline, baselineCommit: streamedCommit, seed, dispose };
    }
    if (spec.carry?.length) {
      // Copied in whole: overlays need a mount on this host, and the copy lives elsewhere.
      seed.carried = await carryInto({
        sourceRoot: await realpath(spec.agentWorkspace),
        owner: undefined,
        exclude,
        warnings: options.warnings,
        signal: options.signal,
        targetRoot: directory,
        paths: spec.carry,
        byteLimit:
          spec.diskBytes === undefined ? undefined : Math.max(0, spec.diskBytes - seed.bytes),
      });
    }
    options.onTreeComplete?.(directory);
    const baselineCommit = await recordBaseline(directory, {
      gitDir: baseline,
      format,
      leaveOut: spec.carry,
      signal: options.signal,
    });
    return { directory, baselineGitDir: baseline, baselineCommit, seed, dispose };
  } catch (error) {
    await dispose();
    throw error;
  }
}

/**
 * Moves a finished baseline into place, before its workspace (so a copy in place always has its
 * baseline). False when another process finished seeding this workspace first. A baseline whose
 * workspace never appeared (a crash between the two renames) is replaced.
 */
async function installBaseline(temporary: string, workspace: string): Promise<boolean> {
  const final = baselineGitDir(workspace);
  for (let attempt = 0; ; attempt += 1) {
    try {
      await rename(temporary, final);
      return true;
    } catch (error) {
      if (!(isErrno(error, "ENOTEMPTY") || isErrno(error, "EEXIST")) || attempt > 0) throw error;
    }
    if (
      await lstat(workspace).then(
        () => true,
        () => false,
      )
    ) {
      return false;
    }
    await rm(final, { recursive: true, force: true });
  }
}

/** How long an existing workspace may still be cordon's own before it counts as unwritable. */
const handOverWaitMs = 5000;

/**
 * The stats of an existing workspace once it has been handed to the container's user. Another
 * cordon process creating the same sandbox makes the directory (or its disk image's mount point)
 * a moment before it gives it away; an agent cannot make it anyone's but its own (no CAP_CHOWN).
 * So a workspace still owned by someone other than the container's user is waited for, briefly.
 */
async function handedOverStats(
  target: string,
  spec: SandboxSpec,
  signal: AbortSignal | undefined,
): Promise<Stats> {
  const user = parseContainerUser(spec.docker.user);
  for (let waited = 0; ; waited += 100) {
    const stats = await lstat(target);
    if (!user || stats.uid === user.uid || permissionsFor(user, stats).write) return stats;
    if (waited >= handOverWaitMs) return stats;
    throwIfAborted(signal, "preparing the private workspace");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * An existing private workspace the container's user cannot write is an error, never a repair:
 * only an agent (or someone by hand) changes its mode once it is in place, and a host-side chown
 * walk over a tree a container can change races with it (a directory swapped for a symlink makes
 * root chown host files). Where cordon could not have given it the workspace in the first place
 * (running as another non-root user), the sandbox's own write probe refuses it with that remedy.
 */
function refuseUnwritable(target: string, stats: Stats, spec: SandboxSpec): void {
  const user = parseContainerUser(spec.docker.user);
  if (!user || permissionsFor(user, stats).write) return;
  const self = processUid();
  if (self !== undefined && self !== 0 && self !== user.uid) return;
  throw new SandboxStartError(
    `the private workspace ${target} is not writable by the container user ${spec.docker.user} (owner ${stats.uid}:${stats.gid}, mode ${(stats.mode & 0o777).toString(8)}; an agent may have changed its mode)`,
    {
      fix: `remove it with \`cordon sandbox rm ${spec.containerName}\` and run again (cordon does not repair a workspace a container could change)`,
    },
  );
}

/**
 * A warning when the container's user cannot write the agent workspace mounted read-write (`rw`),
 * or cannot read it (`ro`). cordon never changes the owner or mode of the user's own files: the
 * fix is theirs to choose.
 */
export async function checkAgentWorkspaceAccess(spec: SandboxSpec): Promise<string | undefined> {
  if (spec.workspaceAccess === "none") return undefined;
  const owner = parseContainerUser(spec.docker.user);
  if (!owner) return undefined;
  let stats;
  try {
    stats = await stat(spec.agentWorkspace);
  } catch (error) {
    throw new SandboxStartError(`the agent workspace ${spec.agentWorkspace} cannot be mounted`, {
      fix: "create it, or point the agent's workspace setting at an existing directory",
      cause: error,
    });
  }
  const allowed = permissionsFor(owner, stats);
  const needed = spec.workspaceAccess === "rw" ? "write" : "read";
  if (allowed[needed]) return undefined;
  return (
    `the container user ${spec.docker.user} cannot ${needed} the agent workspace ` +
    `${spec.agentWorkspace} (owner ${stats.uid}:${stats.gid}, mode ${(stats.mode & 0o777).toString(8)}); ` +
    `set sandbox.docker.user to "${stats.uid}:${stats.gid}" or give uid ${owner.uid} access ` +
    `(cordon does not change your files' owner or mode)`
  );
}

/** The private workspace's absolute path, parents resolved, after checking where it lies. */
async function validatedTarget(spec: SandboxSpec, stateDirectory: string): Promise<string> {
  const target = spec.privateWorkspace;
  if (target === undefined || !path.isAbsolute(target)) {
    throw new SandboxStartError(
      `workspace access "${spec.workspaceAccess}" needs a private workspace, and the sandbox plan has ${target === undefined ? "none" : `a relative one (${target})`}`,
      { fix: "this is a bug in the sandbox plan; report it with `cordon sandbox explain`" },
    );
  }
  await mkdir(stateDirectory, { recursive: true, mode: 0o700 });
  const stateReal = await realpath(stateDirectory);
  await mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
  const resolved = path.join(await realpath(path.dirname(target)), path.basename(target));
  const agentReal = await realpath(spec.agentWorkspace).catch(() => undefined);
  // Below the agent workspace is allowed (CORDON_HOME=./.cordon; seeding skips it); containing
  // it, or the state directory, is not: cordon chowns and deletes its private workspace.
  for (const [what, real] of [
    ["agent workspace", agentReal],
    ["state directory", stateReal],
  ] as const) {
    if (real && isInside(resolved, real)) {
      throw new SandboxStartError(`the private workspace ${target} contains the ${what}`, {
        fix: "set sandbox.workspaceRoot (or CORDON_HOME) to a directory of its own",
      });
    }
  }
  return resolved;
}

/**
 * The owner to give cordon's own copy: the container's user, when this process is root. Not root,
 * cordon keeps it: `user: "auto"` then runs the sandbox as cordon's own uid, and any other user
 * is refused by the sandbox's write probe (docker/workspace-probe.ts) before the agent starts.
 */
function ownerToApply(spec: SandboxSpec): Owner | undefined {
  const owner = parseContainerUser(spec.docker.user);
  const self = processUid();
  return owner && self === 0 && owner.uid !== 0 ? owner : undefined;
}

async function seedInto(
  temporary: string,
  spec: SandboxSpec,
  options: {
    owner: Owner | undefined;
    exclude: string[];
    warnings: string[];
    signal: AbortSignal | undefined;
    fingerprint: boolean;
    onCopied?: ((relative: string) => void) | undefined;
    /** Stream the work tree's files where they can be (`seedClosedCopy`'s `sink`). */
    stream?: { sink: SeedSink; baselineGitDir: string } | undefined;
  },
): Promise<{ seed: SeedInfo; format: RepositoryFormat; baselineCommit?: string | undefined }> {
  let sourceRoot: string;
  try {
    sourceRoot = await realpath(spec.agentWorkspace);
    if (!(await stat(sourceRoot)).isDirectory()) throw new Error("not a directory");
  } catch (error) {
    throw new SandboxStartError(
      `cannot seed the private workspace: the agent workspace ${spec.agentWorkspace} is not a readable directory`,
      {
        fix: "point the agent's workspace setting at an existing directory, or set sandbox.seed to false",
        cause: error,
      },
    );
  }
  const repository = await findRepository(sourceRoot);
  let tracked: string[] = [];
  let summary: CopySummary = { files: 0, directories: 0, symlinks: 0, bytes: 0, skipped: [] };
  let format = defaultRepositoryFormat;
  let gitDirFiles = 0;
  let listed: string[] | undefined;
  // Taken before anything is copied: a change while the copy runs makes the copy stale, never
  // fresh. In two parts for a repository (its .git, the files git lists), as `fingerprintNow`.
  const fingerprintPart = () =>
    options.fingerprint && repository?.kind !== "elsewhere"
      ? new SourceFingerprint(sourceRoot, options.exclude, options.signal)
      : undefined;
  const fingerprint = fingerprintPart();
  const gitDirFingerprint = repository?.kind === "own" ? fingerprintPart() : undefined;
  if (repository?.kind === "own") {
    await gitDirFingerprint?.addGitDir();
    // The sanitized `.git` first: git lists the workspace through it, so the repository's own
    // config (which an `rw` agent could have written) is never read by git on the host.
    const gitCopy = await copySanitizedGitDir({
      sourceRoot,
      targetRoot: temporary,
      owner: options.owner,
      warnings: options.warnings,
      signal: options.signal,
      onCopied: options.onCopied,
    });
    format = gitCopy.format;
    summary = gitCopy.summary;
    gitDirFiles = gitCopy.summary.files;
    const listing = {
      gitDir: path.join(temporary, ".git"),
      workTree: sourceRoot,
      directory: sourceRoot,
      signal: options.signal,
    };
    listed = await listGitFiles(listing);
    tracked = await listGitFiles({ ...listing, trackedOnly: true });
    await fingerprint?.addEntries(listed);
  } else if (repository) {
    const scratch = await mkdtemp(path.join(os.tmpdir(), "cordon-listing-"));
    try {
      const gitDir = path.join(scratch, "git");
      await writeListingGitDir(repository, gitDir, options.warnings);
      const listing = {
        gitDir,
        workTree: repository.workTree,
        directory: sourceRoot,
        signal: options.signal,
      };
      listed = await listGitFiles(listing);
      tracked = await listGitFiles({ ...listing, trackedOnly: true });
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
    if (listed.length === 0) {
      // Inside a repository that ignores this whole directory: git's view is empty, but the user
      // pointed cordon here, so its files are what they mean.
      options.warnings.push(
        `${spec.agentWorkspace} is ignored by the git repository around it; copied it whole`,
      );
      listed = undefined;
    } else if (repository.workTree === sourceRoot) {
      options.warnings.push(
        `${spec.agentWorkspace} is a linked git worktree or submodule (.git is a file); its repository was not copied (the copy gets a fresh one, without history)`,
      );
    } else {
      options.warnings.push(
        `${spec.agentWorkspace} is a subdirectory of a git repository; its files were copied without the repository (the copy gets a fresh one, without history)`,
      );
    }
  }
  const secrets = new SecretFilter({
    sourceRoot,
    include: spec.seedInclude ?? [],
    tracked: new Set(tracked),
  });
  const copier = new TreeCopier({
    sourceRoot,
    targetRoot: temporary,
    owner: options.owner,
    leaveOut: (relative, kind) => secrets.leavesOut(relative, kind),
    // Where cordon keeps its own things, and a `.git` that is no repository (it could hold
    // hooks): never copied. Carried paths come after, by themselves (carry.ts).
    exclude: [
      ...options.exclude,
      path.join(sourceRoot, ".git"),
      ...(spec.carry ?? []).map((entry) => path.join(sourceRoot, entry)),
    ],
    signal: options.signal,
    onCopied: options.onCopied,
  });
  if (!repository) await fingerprint?.addTree("");
  let files: CopySummary;
  let baselineCommit: string | undefined;
  const plan =
    options.stream && listed && repository?.kind === "own" && !spec.carry?.length
      ? await planStreamedSeed(listed, {
          sourceRoot,
          exclude: [...options.exclude, path.join(sourceRoot, ".git")],
          leaveOut: (relative, kind) => secrets.leavesOut(relative, kind),
          signal: options.signal,
        })
      : undefined;
  if (options.stream && plan?.streamable) {
    const baseline = await StreamedBaseline.start(temporary, {
      gitDir: options.stream.baselineGitDir,
      format,
      signal: options.signal,
    });
    try {
      await options.stream.sink.open(temporary);
      files = await streamSeed(plan, {
        sourceRoot,
        sink: options.stream.sink,
        baseline,
        signal: options.signal,
      });
      baselineCommit = await baseline.finish(options.signal);
    } catch (error) {
      await baseline.abort();
      throw error;
    }
  } else {
    files = listed ? await copier.copyEntries(listed) : await copier.copyAll();
  }
  summary = {
    files: summary.files + files.files,
    directories: summary.directories + files.directories,
    symlinks: summary.symlinks + files.symlinks,
    bytes: summary.bytes + files.bytes,
    skipped: [...summary.skipped, ...files.skipped],
  };
  if (repository?.kind !== "own") {
    // A repository of cordon's own, so the agent can use git and diffs have a baseline.
    await writeFreshRepository(path.join(temporary, ".git"), format, options.owner);
  }
  const leftOut = secrets.leftOut();
  if (leftOut.length > 0) options.warnings.push(describeLeftOut(leftOut, "sandbox.seedInclude"));
  if (summary.skipped.length > 0) {
    options.warnings.push(
      `seeding skipped ${summary.skipped.length} entr${summary.skipped.length === 1 ? "y" : "ies"}: ${summary.skipped
        .slice(0, 5)
        .map((s) => `${s.path} (${s.reason})`)
        .join(", ")}`,
    );
  }
  const seed: SeedInfo = {
    source: spec.agentWorkspace,
    method: listed ? "git" : "copy",
    repository: repository !== undefined,
    seededAt: new Date().toISOString(),
    files: summary.files,
    symlinks: summary.symlinks,
    bytes: summary.bytes,
    gitDirFiles,
    skipped: summary.skipped,
    leftOut,
    ...(fingerprint
      ? {
          sourceFingerprint: gitDirFingerprint
            ? joinDigests(gitDirFingerprint, fingerprint)
            : fingerprint.digest(),
        }
      : {}),
  };
  return { seed, format, baselineCommit };
}

/** Temporary seed directories left by processes that died mid-seed. */
async function removeAbandonedSeeds(target: string): Promise<void> {
  const prefix = path.basename(seedTempPrefix(target));
  const parent = path.dirname(target);
  for (const name of await readdir(parent)) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length).split("-")[0]);
    if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) continue;
    await rm(path.join(parent, name), { recursive: true, force: true });
  }
}

/** Carried directories this copy mounts over the share key's snapshot (carry-layers.ts). */
interface Layered {
  snapshot: string;
  paths: string[];
  summary: CarrySummary;
}

/**
 * On a host that can mount overlays: the snapshot (copied now if this is the key's first copy)
 * and the mount points made in the seed. Undefined: everything is copied into the seed.
 *
 * Every seeded copy that carries layers its carried trees, shared or not: a copy of its own
 * (`shareKey` its own name) costs the same copy once, and with `sandbox.disk` the carried tree is
 * then not copied a second time into the copy's filesystem image by `mkfs -d`; fix-tests' work and
 * verify copies name one key, so the second copies nothing.
 */
async function layerCarry(
  spec: SandboxSpec,
  seed: string,
  carry: {
    sourceRoot: string;
    owner: Owner | undefined;
    exclude: string[];
    warnings: string[];
    signal: AbortSignal | undefined;
    shareKey: string;
    byteLimit: number | undefined;
  },
): Promise<Layered | undefined> {
  const paths = spec.carry ?? [];
  if (paths.length === 0) return undefined;
  const refusal = await carryLayerRefusal(paths);
  if (refusal !== undefined) {
    // Only a shared key loses something by copying (a second copy); a copy of its own is as before.
    if (spec.carryShare !== undefined) {
      carry.warnings.push(`the carried paths are copied for each sandbox of this run: ${refusal}`);
    }
    return undefined;
  }
  const snapshot = await ensureCarrySnapshot({
    ...carry,
    workspaceParent: path.dirname(seed),
    paths,
  });
  const layers = await makeMountPoints(seed, await layeredPaths(snapshot.path, paths), carry.owner);
  if (layers.length === 0) return undefined;
  return {
    snapshot: snapshot.path,
    paths: layers,
    summary: {
      ...snapshot.summary,
      paths: [...paths],
      method: "layer",
      snapshot: snapshot.made ? "made" : "reused",
      durationMs: snapshot.made ? snapshot.summary.durationMs : 0,
    },
  };
}
