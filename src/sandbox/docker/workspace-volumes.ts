import { randomBytes } from "node:crypto";
import { lstat, mkdir, rm, writeFile, rename } from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";

import { pack } from "tar-stream";

import { ConfigError, SandboxStartError, throwIfAborted } from "../../common/index.js";
import type { SandboxSpec } from "../spec.js";
import {
  baselineGitDir,
  baselineRef,
  parseContainerUser,
  seedClosedCopy,
  seedMarkerPath,
  type Owner,
  type SeedInfo,
} from "../workspace/index.js";
import type { ContainerClient, VolumeClient, VolumeMount } from "./client/index.js";
import { describeEngineEndpoint, type EngineEndpoint } from "./client/engine-endpoint.js";
import { addEntry, GrowingTreePacker, packTree, type PackedTree } from "./files/tree-transfer.js";
import { TarSeedSink } from "./files/tar-seed-sink.js";
import { inspectorLabels } from "./inspector/workspace-inspector.js";

/**
 * A private copy that lives with the engine (issue 29, item 1): three Docker volumes per sandbox,
 * so nothing of the copy is on this host and the engine may be anywhere.
 *
 * - `<sandbox>-workspace`: the copy, mounted at the workspace path by the sandbox, and by
 *   inspectors as the sandbox mounts it (read-only, or writable for a restore).
 * - `<sandbox>-baseline`: cordon's baseline git dir of the copy, mounted read-only into
 *   inspectors only. A volume of its own rather than a directory beside the copy inside one
 *   volume: API 1.41 engines cannot mount part of a volume, and the sandbox must never see it.
 * - `<sandbox>-checkpoints`: the checkpoint store, writable by recording and restoring
 *   inspectors only (the host path's `<baseline>/checkpoints`).
 *
 * Seeding selects the files exactly as a host copy is seeded and streams them into the volumes
 * with the engine's archive API, into a container that is created and never started: no program
 * runs, the tar's headers (written here) give every entry the sandbox user as owner, links go as
 * links. One pass, with no copy of the work tree on this host: the sanitized `.git` is built in the
 * closed seed directory of `seedClosedCopy` (which no container reaches) and packed as it is made
 * (`GrowingTreePacker`); the work tree's files go from the user's repository straight into the tar
 * and into the baseline at once (`TarSeedSink`, workspace/seed-stream.ts), or, where that could
 * differ from a copy, are copied into the seed directory and packed from there. The volumes and
 * that container are made while the files are listed, and the deleting waits until the sandbox
 * runs (`finish`). What stays on the host is cordon's own record of the copy beside its would-be
 * path: the seed marker (written last, it says the volumes are complete) and a git dir holding
 * only the baseline ref and the checkpoint list.
 *
 * The disk budget: the engine's local driver bounds a volume only as tmpfs (memory, and gone with
 * the engine), so volumes are unbounded on disk; `workspaceUsage` (workspace-usage.ts)
 * measures one in a throwaway container and the manager's DiskWatchdog stops the sandbox past
 * `sandbox.disk`, as it does for an unbounded host copy. A copy just seeded is not measured before
 * its sandbox starts: what was streamed in bounds it (`bytesAtMost`), unless that is over budget.
 */

/** Labels on a copy's volumes (with `cordon.home`, the state directory whose sandbox it is). */
export const volumeLabels = {
  /** The sandbox (container name) whose copy it holds. */
  sandbox: "cordon.volume-of",
  /** workspace | baseline | checkpoints */
  role: "cordon.volume-role",
  /** `uid:gid` of the sandbox user who owns the copy: inspectors run as them. */
  user: "cordon.volume-user",
  home: "cordon.home",
} as const;

/** The volumes of one sandbox's copy. */
export interface WorkspaceVolumes {
  workspace: string;
  baseline: string;
  checkpoints: string;
}

export function workspaceVolumeNames(sandboxName: string): WorkspaceVolumes {
  return {
    workspace: `${sandboxName}-workspace`,
    baseline: `${sandboxName}-baseline`,
    checkpoints: `${sandboxName}-checkpoints`,
  };
}

/**
 * Whether the private copy of `spec` lives in volumes on the engine at `endpoint`: asked for, or
 * "auto" on an engine that does not share this host's filesystem. "host" there is refused (exit
 * 2): the engine cannot bind a path of this host.
 */
export function usesWorkspaceVolumes(spec: SandboxSpec, endpoint: EngineEndpoint): boolean {
  if (spec.workspaceAccess === "rw" || spec.privateWorkspace === undefined) return false;
  const storage = spec.workspaceStorage ?? "auto";
  if (storage === "volume") return true;
  if (storage === "auto") return !endpoint.sharesFilesystem;
  if (!endpoint.sharesFilesystem) {
    throw new ConfigError(
      `sandbox.workspaceStorage is "host", and the Docker engine at ${describeEngineEndpoint(endpoint)} does not share this host's filesystem`,
      {
        fix: 'set sandbox.workspaceStorage to "auto" or "volume": the copy then lives on the engine',
      },
    );
  }
  return false;
}

/** The workspace mount of a sandbox whose copy is in volumes (container-options.ts). */
export function workspaceVolumeMount(spec: SandboxSpec): VolumeMount | undefined {
  const mount = spec.mounts.find((m) => m.role === "workspace");
  if (!mount) return undefined;
  return {
    Type: "volume",
    Source: workspaceVolumeNames(spec.containerName).workspace,
    Target: mount.target,
    ReadOnly: mount.readOnly,
  };
}

export interface EnsureWorkspaceVolumesOptions {
  containers: ContainerClient;
  volumes: VolumeClient;
  stateDirectory: string;
  /** An image on the engine to create the (never started) seeding container from. */
  image: string;
  warnings: string[];
  fingerprint?: boolean | undefined;
  signal?: AbortSignal | undefined;
}

export interface EnsuredWorkspaceVolumes {
  volumes: WorkspaceVolumes;
  created: boolean;
  /** Set when this call seeded it. */
  seed?: SeedInfo | undefined;
  /**
   * Set when this call seeded it: bytes of the engine's disk the workspace volume takes at most
   * (`DiskWatchdog`'s `atMost`), from what was streamed into it.
   */
  bytesAtMost?: number | undefined;
  /**
   * Set when this call seeded it: the cleanup seeding leaves, which nothing needs once the volumes
   * are complete (the seed directory deleted, the seeding container removed). The caller runs it
   * after the sandbox has started, or at once when the acquire fails; never rejects, it resolves
   * to what failed, for the log. Left undone (a process that died), `removeAbandonedSeeds` and
   * prune remove both, and removing the sandbox removes its seeding container before its volumes.
   */
  finish?: (() => Promise<Error | undefined>) | undefined;
}

/**
 * Makes sure the copy of `spec` exists in its volumes, seeding it when new (see the module
 * comment). A copy whose volumes exist without the seed marker was cut short (a crash while
 * streaming) and is made again; volumes of another state directory are refused, never used.
 */
export async function ensureWorkspaceVolumes(
  spec: SandboxSpec,
  options: EnsureWorkspaceVolumesOptions,
): Promise<EnsuredWorkspaceVolumes> {
  const volumes = workspaceVolumeNames(spec.containerName);
  const privateWorkspace = spec.privateWorkspace;
  if (privateWorkspace === undefined) {
    throw new SandboxStartError("a copy in volumes needs a private workspace in the plan", {
      fix: "this is a bug in the sandbox plan; report it with `cordon sandbox explain`",
    });
  }
  const owner = parseContainerUser(spec.docker.user);
  if (!owner) {
    throw new SandboxStartError(
      `a copy in volumes needs a numeric sandbox user, not ${spec.docker.user}`,
      { fix: 'set sandbox.docker.user to "uid:gid", or sandbox.workspaceStorage to "host"' },
    );
  }
  const existing = await options.volumes.inspect(volumes.workspace);
  if (existing) {
    const home = existing.labels[volumeLabels.home];
    if (
      home !== options.stateDirectory ||
      existing.labels[volumeLabels.sandbox] !== spec.containerName
    ) {
      throw new SandboxStartError(
        `the volume ${volumes.workspace} is not this sandbox's copy (it belongs to ${home ? `the state directory ${home}` : "no cordon state directory"})`,
        {
          fix: `remove it with \`docker volume rm ${volumes.workspace}\` if it is yours to remove, or use another CORDON_HOME`,
        },
      );
    }
    if (!spec.seed || (await exists(seedMarkerPath(privateWorkspace)))) {
      return { volumes, created: false };
    }
    // Volumes without the marker: a seed cut short. Nothing of the agent's can be in them yet.
    await removeWorkspaceVolumes(options.volumes, spec.containerName, options.stateDirectory);
  }
  throwIfAborted(options.signal, "preparing the private workspace");
  const labels = (role: keyof WorkspaceVolumes): Record<string, string> => ({
    [volumeLabels.sandbox]: spec.containerName,
    [volumeLabels.role]: role,
    [volumeLabels.user]: `${owner.uid}:${owner.gid}`,
    [volumeLabels.home]: options.stateDirectory,
  });
  if (!spec.seed) {
    await options.volumes.create({ name: volumes.workspace, labels: labels("workspace") });
    await streamIntoVolumes(
      options,
      spec.containerName,
      { workspace: volumes.workspace },
      (archive) =>
        addEntry(archive, { name: "workspace", type: "directory", mode: 0o755, ...owner }),
    );
    return { volumes, created: true };
  }
  // The volumes and the seeding container are made, and the engine extracts the files into them,
  // while this host selects and copies them: each file is streamed once the seed has it.
  const roles = ["baseline", "checkpoints", "workspace"] as const;
  const madeContainer = (async () => {
    await Promise.all(
      roles.map((role) => options.volumes.create({ name: volumes[role], labels: labels(role) })),
    );
    return openArchiveContainer(options, spec.containerName, seedMounts(volumes));
  })();
  const archive = pack();
  const uploaded = madeContainer.then((container) =>
    options.containers.putArchive(container.id, "/seed", Readable.from(coalesced(archive))),
  );
  const packer = new GrowingTreePacker(archive, {
    prefix: "workspace/",
    owner,
    rootEntry: { name: "workspace", type: "directory", mode: 0o755, ...owner },
  });
  // The copy's tree is packed to its end while its baseline is recorded: the engine extracts the
  // last of it meanwhile, rather than after (issue 29's bench: the upload's tail).
  let treePacked: Promise<PackedTree> | undefined;
  const packSeedDirectory = (directory: string): Promise<PackedTree> => {
    if (!treePacked) {
      treePacked = packer.finish(directory);
      // Awaited below once the seed is complete; a seed that fails after this never awaits it.
      treePacked.catch(() => undefined);
    }
    return treePacked;
  };
  // The work tree's files, where they can be, go from the user's repository straight into the
  // tar after the seed directory's `.git` (workspace/seed-stream.ts): no copy on this host.
  const sink = new TarSeedSink(archive, {
    prefix: "workspace/",
    owner,
    open: async (directory) => {
      await packSeedDirectory(directory);
    },
  });
  const seeded = seedClosedCopy(spec, {
    stateDirectory: options.stateDirectory,
    fingerprint: options.fingerprint,
    signal: options.signal,
    warnings: options.warnings,
    onCopied: (directory, relative) => packer.add(directory, relative),
    onTreeComplete: (directory) => void packSeedDirectory(directory),
    sink,
  });
  let packed: PackedTree | undefined;
  let recorded: Promise<void> | undefined;
  try {
    await Promise.all([
      uploaded,
      (async () => {
        const closed = await seeded;
        // While the engine still writes: the marker (written last) is what says it is complete.
        recorded = writeBaselineRecord(privateWorkspace, closed.baselineCommit);
        recorded.catch(() => undefined);
        const tree = await packSeedDirectory(closed.directory);
        packed = {
          entries: tree.entries + sink.packed.entries,
          fileBytes: tree.fileBytes + sink.packed.fileBytes,
        };
        // cordon's git dir: read by inspectors as the sandbox user; the agent's container never mounts it.
        await addEntry(archive, { name: "baseline", type: "directory", mode: 0o700, ...owner });
        await packTree(archive, closed.baselineGitDir, { prefix: "baseline/", owner });
        await addEntry(archive, { name: "checkpoints", type: "directory", mode: 0o700, ...owner });
        archive.finalize();
        await recorded;
      })(),
    ]);
  } catch (error) {
    archive.destroy(error instanceof Error ? error : new Error(String(error)));
    // Both settle before anything is removed: a volume in use by a container cannot be.
    const [closed, container] = await Promise.all([
      seeded.catch(() => undefined),
      madeContainer.catch(() => undefined),
      uploaded.catch(() => undefined),
    ]);
    await recorded?.catch(() => undefined);
    await Promise.all([
      closed?.dispose(),
      container?.remove(),
      recorded && rm(baselineGitDir(privateWorkspace), { recursive: true, force: true }),
    ]).catch(() => undefined);
    await removeWorkspaceVolumes(options.volumes, spec.containerName, options.stateDirectory).catch(
      () => undefined,
    );
    throw error;
  }
  const closed = await seeded;
  const container = await madeContainer;
  // The volumes are complete: deleting the seed directory and the seeding container waits until
  // the sandbox runs, off the new session's path (issue 29's bench: done while the sandbox was
  // created and started, the two competed with it for the engine and the disk, ~50-100 ms).
  const finish = (): Promise<Error | undefined> =>
    Promise.all([container.remove(), closed.dispose()]).then(
      () => undefined,
      (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
    );
  try {
    await writeSeedMarker(privateWorkspace, closed.seed);
  } catch (error) {
    await finish();
    await removeWorkspaceVolumes(options.volumes, spec.containerName, options.stateDirectory).catch(
      () => undefined,
    );
    throw error;
  }
  return {
    volumes,
    created: true,
    seed: closed.seed,
    bytesAtMost: packed && allocatedAtMost(packed),
    finish,
  };
}

/**
 * More bytes than `packed` can take on any filesystem an engine keeps volumes on, as `du` counts
 * them (allocated blocks): each entry rounded up by 128 KiB (a block is at most 64 KiB on ext4,
 * XFS and btrfs; a ZFS record 128 KiB; a directory takes a block per hundred-odd names), and
 * a fiftieth of the content for the blocks that map large files.
 */
function allocatedAtMost(packed: PackedTree): number {
  return Math.ceil(packed.fileBytes * 1.02) + (packed.entries + 1) * 128 * 1024;
}

/** Each volume mounted at `/seed/<role>` of an archive container. */
function seedMounts(volumes: Partial<WorkspaceVolumes>): VolumeMount[] {
  return Object.entries(volumes).map(([role, volume]) => ({
    Type: "volume" as const,
    Source: volume,
    Target: `/seed/${role}`,
    ReadOnly: false,
  }));
}

export interface MakeForkVolumesOptions {
  containers: ContainerClient;
  volumes: VolumeClient;
  stateDirectory: string;
  /** An image on the engine to create the (never started) copying containers from. */
  image: string;
}

/**
 * The volumes of a fork (`DockerSandboxManager.fork`) of `source`'s copy in volumes, ready for
 * the fork inspector to fill its workspace: the workspace and checkpoint store empty and the
 * sandbox user's, the baseline a copy of the parent's. False when a volume of the fork's exists
 * already (another process made it meanwhile; nothing is touched then).
 *
 * The baseline is cordon's own (seeded here; mounted read-only into inspectors and into no
 * sandbox, so nothing the agent runs can write it), and moves engine to engine as the archive
 * API's tar stream, out of a never-started container mounting the parent's read-only and into
 * another mounting the fork's: the host passes the bytes on unread and runs no program over them,
 * and the fork inspector, which runs `cp` over the agent's files, never mounts it.
 */
export async function makeForkVolumes(
  source: SandboxSpec,
  target: SandboxSpec,
  options: MakeForkVolumesOptions,
): Promise<boolean> {
  const owner = parseContainerUser(target.docker.user);
  if (!owner) {
    throw new SandboxStartError(
      `a copy in volumes needs a numeric sandbox user, not ${target.docker.user}`,
      { fix: 'set sandbox.docker.user to "uid:gid", or sandbox.workspaceStorage to "host"' },
    );
  }
  const from = workspaceVolumeNames(source.containerName);
  const to = workspaceVolumeNames(target.containerName);
  for (const name of [to.workspace, to.baseline, to.checkpoints]) {
    if (await options.volumes.inspect(name)) return false;
  }
  const parent = await options.volumes.inspect(from.baseline);
  if (parent?.labels[volumeLabels.home] !== options.stateDirectory) {
    throw new SandboxStartError(
      `${source.containerName} has no baseline volume of this state directory (${from.baseline})`,
      {
        fix: `remove the sandbox with \`cordon sandbox rm ${source.containerName}\` and seed it again`,
      },
    );
  }
  try {
    for (const role of ["baseline", "checkpoints", "workspace"] as const) {
      await options.volumes.create({
        name: to[role],
        labels: {
          [volumeLabels.sandbox]: target.containerName,
          [volumeLabels.role]: role,
          [volumeLabels.user]: `${owner.uid}:${owner.gid}`,
          [volumeLabels.home]: options.stateDirectory,
        },
      });
    }
    await streamIntoVolumes(
      options,
      target.containerName,
      { workspace: to.workspace, checkpoints: to.checkpoints },
      async (archive) => {
        await addEntry(archive, { name: "workspace", type: "directory", mode: 0o755, ...owner });
        await addEntry(archive, { name: "checkpoints", type: "directory", mode: 0o700, ...owner });
      },
    );
    await withArchiveContainer(
      options,
      source.containerName,
      [{ Type: "volume", Source: from.baseline, Target: "/from/baseline", ReadOnly: true }],
      async (reader) => {
        const baseline = await options.containers.getArchive(reader, "/from/baseline");
        await withArchiveContainer(
          options,
          target.containerName,
          [{ Type: "volume", Source: to.baseline, Target: "/seed/baseline", ReadOnly: false }],
          (writer) => options.containers.putArchive(writer, "/seed", baseline),
        );
      },
    );
    return true;
  } catch (error) {
    await removeWorkspaceVolumes(
      options.volumes,
      target.containerName,
      options.stateDirectory,
    ).catch(() => undefined);
    throw error;
  }
}

/** One tar stream into the volumes, each mounted at `/seed/<role>` of an archive container. */
async function streamIntoVolumes(
  options: ArchiveContainerOptions,
  sandboxName: string,
  volumes: Partial<WorkspaceVolumes>,
  write: (archive: ReturnType<typeof pack>) => Promise<void>,
): Promise<void> {
  await withArchiveContainer(options, sandboxName, seedMounts(volumes), (id) =>
    streamInto(options, id, write),
  );
}

/** One tar stream, written by `write`, into `/seed` of the archive container `id`. */
async function streamInto(
  options: Pick<ArchiveContainerOptions, "containers">,
  id: string,
  write: (archive: ReturnType<typeof pack>) => Promise<void>,
): Promise<void> {
  const archive = pack();
  const packing = write(archive).then(
    () => archive.finalize(),
    (error: unknown) => archive.destroy(error instanceof Error ? error : new Error(String(error))),
  );
  await Promise.all([
    options.containers.putArchive(id, "/seed", Readable.from(coalesced(archive))),
    packing,
  ]);
}

type ArchiveContainerOptions = Pick<
  MakeForkVolumesOptions,
  "containers" | "image" | "stateDirectory"
>;

/**
 * Runs `use` with a container that is created with `mounts`, never started (no program of its
 * image runs), and removed after: the engine's archive API reads and writes its mounts. Mount
 * points are paths the image does not have, so the engine copies nothing of the image into a
 * volume, and an archive's `<role>/` entry gives the volume's root its owner and mode.
 */
async function withArchiveContainer<T>(
  options: ArchiveContainerOptions,
  sandboxName: string,
  mounts: VolumeMount[],
  use: (id: string) => Promise<T>,
): Promise<T> {
  const container = await openArchiveContainer(options, sandboxName, mounts);
  try {
    return await use(container.id);
  } finally {
    await container.remove();
  }
}

/** An archive container (`withArchiveContainer`), for a caller that removes it itself. */
async function openArchiveContainer(
  options: ArchiveContainerOptions,
  sandboxName: string,
  mounts: VolumeMount[],
): Promise<{ id: string; remove: () => Promise<void> }> {
  const name = `${sandboxName}-seed-${randomBytes(4).toString("hex")}`;
  const id = await options.containers.create({
    name,
    Image: options.image,
    User: "0:0",
    Entrypoint: ["true"],
    Cmd: [],
    // An inspector's labels: prune removes one a dead process left behind, never started.
    Labels: {
      [inspectorLabels.sandbox]: sandboxName,
      [inspectorLabels.home]: options.stateDirectory,
    },
    NetworkDisabled: true,
    HostConfig: {
      NetworkMode: "none",
      // Not read-only: the engine refuses an archive into any container with a read-only root,
      // volumes included. It never starts, so nothing could write there anyway.
      CapDrop: ["ALL"],
      SecurityOpt: ["no-new-privileges:true"],
      Privileged: false,
      Mounts: mounts,
    },
  });
  if (id === undefined) {
    throw new SandboxStartError(`cannot create the seeding container ${name}: the name is taken`, {
      fix: "run the command again",
    });
  }
  return { id, remove: () => options.containers.remove(id, name) };
}

/**
 * cordon's own record of a copy in volumes, on this host beside its would-be path: a git dir with
 * only the baseline ref (what `assertHasBaseline` asks; the checkpoint list goes there too).
 * Written while the volumes are filled; the seed marker (`writeSeedMarker`) comes after them.
 */
async function writeBaselineRecord(privateWorkspace: string, commit: string): Promise<void> {
  const records = baselineGitDir(privateWorkspace);
  await rm(records, { recursive: true, force: true });
  await mkdir(path.join(records, path.dirname(baselineRef)), { recursive: true, mode: 0o700 });
  await writeFile(path.join(records, baselineRef), `${commit}\n`, { mode: 0o600 });
}

/** The seed marker, written aside and renamed: once it is there, the volumes are complete. */
async function writeSeedMarker(privateWorkspace: string, seed: SeedInfo): Promise<void> {
  const marker = seedMarkerPath(privateWorkspace);
  await writeFile(`${marker}.tmp-${process.pid}`, `${JSON.stringify(seed, null, 2)}\n`, {
    mode: 0o600,
  });
  await rename(`${marker}.tmp-${process.pid}`, marker);
}

/**
 * Removes the volumes of a sandbox's copy that belong to `stateDirectory` (a label is checked,
 * never trusted to name another's); gone counts as removed.
 */
export async function removeWorkspaceVolumes(
  volumes: VolumeClient,
  sandboxName: string,
  stateDirectory: string,
): Promise<string[]> {
  const names = workspaceVolumeNames(sandboxName);
  const removed: string[] = [];
  for (const name of [names.workspace, names.baseline, names.checkpoints]) {
    const found = await volumes.inspect(name);
    if (
      found?.labels[volumeLabels.home] === stateDirectory &&
      found.labels[volumeLabels.sandbox] === sandboxName
    ) {
      await volumes.remove(name);
      removed.push(name);
    }
  }
  return removed;
}

/**
 * The volumes of `sandboxName`'s copy in `stateDirectory`, with the user who owns it; undefined
 * when its copy is not in volumes (or they belong to another state directory).
 */
export async function workspaceVolumesOf(
  volumes: VolumeClient,
  sandboxName: string,
  stateDirectory: string,
): Promise<{ volumes: WorkspaceVolumes; user: Owner } | undefined> {
  const names = workspaceVolumeNames(sandboxName);
  const found = await volumes.inspect(names.workspace);
  if (!found || found.labels[volumeLabels.home] !== stateDirectory) return undefined;
  const user = parseContainerUser(found.labels[volumeLabels.user] ?? "");
  return user ? { volumes: names, user } : undefined;
}

async function exists(file: string): Promise<boolean> {
  return lstat(file).then(
    () => true,
    () => false,
  );
}

/** Bytes sent to the engine a piece at a time (a tar pack yields one chunk per header). */
const streamPieceBytes = 256 * 1024;

/**
 * A tar pack's chunks joined into pieces of about 256 KiB: sent one chunk a write, the engine's
 * archive upload of a seeded repository was a fifth slower (bench `volumes`).
 */
async function* coalesced(source: AsyncIterable<unknown>): AsyncIterable<Uint8Array> {
  let pieces: Uint8Array[] = [];
  let bytes = 0;
  for await (const chunk of source) {
    // streamx streams yield untyped chunks; a tar pack yields bytes.
    const piece = chunk as Uint8Array;
    pieces.push(piece);
    bytes += piece.byteLength;
    if (bytes >= streamPieceBytes) {
      yield Buffer.concat(pieces);
      pieces = [];
      bytes = 0;
    }
  }
  if (bytes > 0) yield Buffer.concat(pieces);
}
