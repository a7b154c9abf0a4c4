import { lstat, stat } from "node:fs/promises";

import { createSilentLogger, messageOf, type Logger } from "../../common/index.js";
import { appliedChangesDigest, patchDigest } from "../changes-records/index.js";
import {
  attachWorkspaceDisk,
  baselineGitDir,
  diskImagePath,
  mountCountAt,
  unmountWorkspaceDisk,
} from "../workspace/index.js";
import type { ContainerClient, VolumeClient } from "./client/index.js";
import { whileFrozen } from "./freeze-container.js";
import { WorkspaceInspectors, dockerWorkspaceChanges } from "./inspector/index.js";
import { workspaceVolumesOf, type WorkspaceVolumes } from "./workspace-volumes.js";

/** Work in a private copy that `cordon apply` has not put into the real workspace. */
export interface UnappliedChanges {
  /** Files that differ from the seed (all of them, applied before or not). */
  changedFiles: number;
  /**
   * `cordon apply` applied an earlier state of this copy: some of the changed files may be in the
   * real workspace already, and the copy changed since. False: nothing of it was ever applied.
   */
  changedSinceApplied: boolean;
  /** sha256 of the patch: the one `cordon diff` shows. */
  sha256: string;
  /**
   * The command that shows them, run in `project`; `cordon apply` with the same flags applies
   * them. Unknown for a copy whose container and record are both gone.
   */
  review?: string | undefined;
  /** The project (agent workspace) the copy was seeded from, when known. */
  project?: string | undefined;
}

/**
 * What a private copy holds: nothing to lose (not a seeded copy, unchanged, or exactly what was
 * applied), unapplied changes, or unknown (the copy could not be read; cleanup keeps it).
 */
export type CopyWork =
  | { state: "none" }
  | { state: "unapplied"; changes: UnappliedChanges }
  | { state: "unknown"; reason: string };

/** The sandbox whose copy is checked. */
export interface CheckedCopy {
  /** The sandbox's container name (names the changes records). */
  name: string;
  /** Host path of the private copy. */
  privateWorkspace: string;
  /** The project it was seeded from, and the session and agent that name it to `cordon diff`. */
  project?: string | undefined;
  sessionKey?: string | undefined;
  agent?: string | undefined;
  /** An image that has the sandbox's git: the container's own image id while it exists. */
  image: string | undefined;
  /** Its container, when it still exists: paused while the copy is read if it runs. */
  containerId?: string | undefined;
}

export interface UnappliedChangesCheckOptions {
  containers: ContainerClient;
  /** Where a copy that lives with the engine is found (workspace-volumes.ts). */
  volumes: VolumeClient;
  stateDirectory: string;
  logger?: Logger | undefined;
}

/**
 * Tells whether a sandbox's private copy holds work that was never applied, before cleanup
 * deletes it. The copy is agent-written, so it is read the only way cordon reads one: by a
 * throwaway inspector container with the sandbox frozen (DESIGN.md §10), never by a host program.
 * Its patch is compared with the sha256 `cordon apply` recorded.
 */
export class UnappliedChangesCheck {
  private readonly containers: ContainerClient;
  private readonly inspectors: WorkspaceInspectors;
  private readonly logger: Logger;

  constructor(private readonly options: UnappliedChangesCheckOptions) {
    this.containers = options.containers;
    this.logger = options.logger ?? createSilentLogger();
    this.inspectors = new WorkspaceInspectors({
      containers: options.containers,
      logger: this.logger,
    });
  }

  async check(copy: CheckedCopy): Promise<CopyWork> {
    const workspace = copy.privateWorkspace;
    const inVolumes = await workspaceVolumesOf(
      this.options.volumes,
      copy.name,
      this.options.stateDirectory,
    ).catch(() => undefined);
    // Without cordon's baseline there is no seed to compare with: an empty scratch directory
    // (seed off, or `ro` access), nothing `cordon diff` could show. A copy in volumes has its
    // baseline in a volume, read even when cordon's records on this host are gone.
    const hasBaseline = inVolumes
      ? (await this.options.volumes.inspect(inVolumes.volumes.baseline)) !== undefined
      : (await lstat(baselineGitDir(workspace)).catch(() => undefined)) !== undefined;
    if (!hasBaseline) return { state: "none" };
    if (!copy.image) return unknown("no image to read it with is known");
    const owner = inVolumes?.user ?? (await stat(workspace).catch(() => undefined));
    if (!owner) return { state: "none" };
    let mounted = false;
    try {
      mounted = inVolumes ? false : await this.mountDisk(workspace);
      const read = await this.read(
        copy,
        `${owner.uid}:${owner.gid}`,
        copy.image,
        inVolumes?.volumes,
      );
      if (!read) return { state: "none" };
      const sha256 = patchDigest(read.patch);
      const applied = await appliedChangesDigest(this.options.stateDirectory, copy.name);
      if (applied === sha256) return { state: "none" };
      return {
        state: "unapplied",
        changes: {
          changedFiles: read.files,
          changedSinceApplied: applied !== undefined,
          sha256,
          review:
            copy.agent && copy.sessionKey ? reviewCommand(copy.agent, copy.sessionKey) : undefined,
          project: copy.project || undefined,
        },
      };
    } catch (error) {
      this.logger.debug({ err: error, sandbox: copy.name }, "cannot read a private copy");
      return unknown(messageOf(error));
    } finally {
      if (mounted) await unmountWorkspaceDisk(workspace).catch(() => undefined);
    }
  }

  /** The changed-file count and patch, or undefined when nothing changed. */
  private async read(
    copy: CheckedCopy,
    user: string,
    image: string,
    volumes: WorkspaceVolumes | undefined,
  ): Promise<{ files: number; patch: Uint8Array } | undefined> {
    const info = copy.containerId ? await this.containers.inspect(copy.containerId) : undefined;
    const changes = dockerWorkspaceChanges({
      inspectors: this.inspectors,
      target: {
        sandboxName: copy.name,
        workspace: copy.privateWorkspace,
        baselineGitDir: baselineGitDir(copy.privateWorkspace),
        image,
        user,
        stateDirectory: this.options.stateDirectory,
        ...(volumes ? { volumes } : {}),
      },
      // Frozen once around both readings below, so the count and the patch are one state.
      freeze: (fn) => fn(),
    });
    try {
      return await whileFrozen(
        this.containers,
        info,
        async () => {
          const files = await changes.changedFiles();
          if (files.size === 0) return undefined;
          return { files: files.size, patch: await changes.patch() };
        },
        { stateDirectory: this.options.stateDirectory, containerName: copy.name },
      );
    } finally {
      await changes.dispose();
    }
  }

  /**
   * A copy in a disk image that is not mounted (its sandbox was removed with the workspace kept)
   * reads as an empty directory: it is mounted for the reading, and unmounted after.
   */
  private async mountDisk(workspace: string): Promise<boolean> {
    if (!(await lstat(diskImagePath(workspace)).catch(() => undefined))) return false;
    if ((await mountCountAt(workspace)) > 0) return false;
    await attachWorkspaceDisk(workspace, { diskBytes: undefined, warnings: [] });
    return true;
  }
}

/**
 * "3 changed files never applied", or, when an earlier state was applied, "3 files changed since
 * seeding, and changes since `cordon apply` last applied it": what is counted is every file that
 * differs from the seed, so a count after an apply says so rather than claim none was applied.
 */
export function describeUnapplied(changes: UnappliedChanges): string {
  const files = `${changes.changedFiles} ${changes.changedFiles === 1 ? "file" : "files"}`;
  return changes.changedSinceApplied
    ? `changes made since \`cordon apply\` last applied its work (${files} differ from the seed, some perhaps applied already)`
    : `${changes.changedFiles} changed ${changes.changedFiles === 1 ? "file" : "files"} never applied`;
}

function unknown(reason: string): CopyWork {
  return { state: "unknown", reason: `cannot tell whether it holds unapplied changes: ${reason}` };
}

/** `cordon diff --agent A --session S`: what shows a sandbox's changes, from its project. */
export function reviewCommand(agent: string, sessionKey: string): string {
  const prefix = `agent:${agent}:`;
  const session = sessionKey.startsWith(prefix) ? sessionKey.slice(prefix.length) : sessionKey;
  return `cordon diff --agent ${shellWord(agent)} --session ${shellWord(session)}`;
}

function shellWord(word: string): string {
  return /^[A-Za-z0-9_.:@%+=,/-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}
