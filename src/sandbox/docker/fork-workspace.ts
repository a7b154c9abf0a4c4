import { lstat } from "node:fs/promises";

import { ConfigError, CordonError, ExitCode } from "../../common/index.js";
import type { SandboxSpec } from "../spec.js";
import { baselineGitDir, diskImagePath } from "../workspace/index.js";
import type { InspectedWorkspace, WorkspaceInspectors } from "./inspector/index.js";

/**
 * Forking a sandbox (`DockerSandboxManager.fork`): a new sandbox whose private copy starts as
 * another's is now. The files are copied by a throwaway inspector container that mounts the
 * parent's copy read-only and the fork's writable (fork-copy.sh), with the parent frozen, so the
 * host runs no program over the agent's tree (DESIGN.md §10); the host copies only cordon's own
 * baseline git dir and seed marker (workspace/fork-baseline.ts). Both kinds of copy go the same
 * way: a plain directory, or a disk image's mounted filesystem (the fork gets an image of its
 * own, of its spec's size, and the copy is made through the mounts) — never a copy of a mounted
 * image's bytes, which would catch the filesystem mid-write.
 */

/** The sandbox a fork was to make exists already: its work is never replaced. Exit 2. */
export class ForkTargetExistsError extends CordonError {
  readonly code = "fork_target_exists";
  readonly exitCode = ExitCode.usage;
}

/**
 * Throws a usage error unless `source` and `target` can be parent and fork: both seeded private
 * copies (workspaceAccess none, seed on) of different sandboxes, with one container user (the
 * copy is made as that user, and the fork's files must be its).
 */
export function assertForkable(source: SandboxSpec, target: SandboxSpec): void {
  for (const [role, spec] of [
    ["the sandbox to fork", source],
    ["the fork", target],
  ] as const) {
    if (spec.workspaceAccess !== "none" || !spec.seed || !spec.privateWorkspace) {
      throw new ConfigError(
        `${role} (${spec.containerName}) does not work on a seeded private copy (workspaceAccess ${spec.workspaceAccess}${spec.seed ? "" : ", seed off"}), so it cannot be forked`,
        {
          fix: 'forks are of seeded private copies: sandbox.workspaceAccess "none" with sandbox.seed true (the default)',
        },
      );
    }
  }
  if (
    source.containerName === target.containerName ||
    source.privateWorkspace === target.privateWorkspace
  ) {
    throw new ConfigError(
      `the fork would be the same sandbox as its parent (${source.containerName}): its scope does not tell sessions apart (sandbox.scope ${source.scope})`,
      { fix: 'forks need a sandbox per session: set sandbox.scope to "session"' },
    );
  }
  if (source.docker.user !== target.docker.user) {
    throw new ConfigError(
      `the fork's sandbox user ${target.docker.user} is not its parent's (${source.docker.user})`,
      { fix: "fork with the same agent and sandbox.docker.user as the parent session" },
    );
  }
}

/**
 * Throws `ForkTargetExistsError` when the fork's sandbox has anything of its own: a container,
 * a record, a private copy, its baseline or disk image.
 */
export async function assertNoForkTarget(
  target: SandboxSpec,
  has: { containerOrRecord: (name: string) => Promise<boolean> },
): Promise<void> {
  const workspace = target.privateWorkspace ?? "";
  const paths = [workspace, baselineGitDir(workspace), diskImagePath(workspace)];
  const found = await Promise.all(
    paths.map((file) =>
      lstat(file).then(
        () => true,
        () => false,
      ),
    ),
  );
  if (found.some(Boolean) || (await has.containerOrRecord(target.containerName))) {
    throw new ForkTargetExistsError(
      `the sandbox ${target.containerName} exists already${target.sessionKey ? ` (session ${target.sessionKey})` : ""}: a fork never replaces one`,
      {
        fix: "fork under another name, or remove that sandbox first (`cordon sandbox rm`)",
      },
    );
  }
}

/**
 * Copies the parent's private copy into the fork's (an empty one, or a pool member's seed, which
 * is replaced) in a throwaway inspector, the parent frozen by `freeze` meanwhile.
 */
export async function copyIntoFork(options: {
  inspectors: WorkspaceInspectors;
  /** The parent's copy, as its inspectors see it. */
  source: InspectedWorkspace;
  /** Host path of the fork's private copy. */
  target: string;
  freeze: <T>(fn: () => Promise<T>) => Promise<T>;
  signal?: AbortSignal | undefined;
}): Promise<void> {
  // Started before the freeze, so the parent is paused only while the files are copied.
  const inspector = await options.inspectors.start(
    { ...options.source, forkTarget: options.target },
    { access: "fork" },
  );
  try {
    await options.freeze(() =>
      inspector.run({ mode: "fork", pathspecs: new Uint8Array(), signal: options.signal }),
    );
  } finally {
    await inspector.remove();
  }
}
