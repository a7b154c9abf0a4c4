import {
  assertHasBaseline,
  baselinePathspecs,
  openBaselineTo,
  parseBaselineDirectories,
  parseChangedFiles,
  parseContainerUser,
  type WorkspaceChanges,
  type WorkspaceChangesOptions,
} from "../../workspace/index.js";
import { spareInspector } from "./spare-inspector.js";
import {
  type InspectedWorkspace,
  type InspectionMode,
  type WorkspaceInspectors,
} from "./workspace-inspector.js";

export interface DockerWorkspaceChangesOptions {
  inspectors: WorkspaceInspectors;
  target: InspectedWorkspace;
  /** Runs `fn` with every process of the sandbox paused (`SandboxLease.freeze`, sandbox/lease.ts). */
  freeze: <T>(fn: () => Promise<T>) => Promise<T>;
}

/** A reader of changes that keeps a spare inspector warm until it is disposed of. */
export interface DockerWorkspaceChanges extends WorkspaceChanges {
  /**
   * Readings are coming: starts a spare inspector now, and another after each reading until
   * `dispose`. Unprepared, each reading starts its own and leaves none behind.
   */
  prepare(): void;
  /** Removes the spare inspector, if one is waiting. */
  dispose(): Promise<void>;
}

/**
 * The changes of a Docker sandbox's private copy. An inspector is started before the sandbox is
 * frozen (it only idles until used, so the pause stays short); the sandbox is then frozen while
 * the inspector reads the copy against cordon's baseline, so what is read is one state.
 *
 * Once prepared, a spare inspector is kept started (spare-inspector.ts): fix-tests reads a copy
 * several times while it holds a sandbox. A reader nobody prepared (a prune's check) starts no
 * spare it would only remove.
 */
export function dockerWorkspaceChanges(
  options: DockerWorkspaceChangesOptions,
): DockerWorkspaceChanges {
  const { target, inspectors } = options;
  const spares = spareInspector(() => inspectors.start(target));

  const inspect = async (
    mode: InspectionMode,
    request: WorkspaceChangesOptions = {},
  ): Promise<Buffer> => {
    await assertHasBaseline(target.workspace);
    const owner = parseContainerUser(target.user);
    // A baseline in a volume was given to the sandbox user when it was streamed there.
    if (owner && !target.volumes) await openBaselineTo(target.workspace, owner);
    // The spare was started with the default deadline: a reading with its own starts its own.
    const spare = request.timeoutMs === undefined ? await spares.take() : undefined;
    const inspector = spare ?? (await inspectors.start(target, { timeoutMs: request.timeoutMs }));
    const run = (): Promise<Buffer> =>
      inspector.run({
        mode,
        pathspecs: baselinePathspecs(request.exclude),
        signal: request.signal,
        timeoutMs: request.timeoutMs,
      });
    try {
      // The baseline's directories are read from cordon's git dir alone: nothing to hold still.
      return await (mode === "baseline-directories" ? run() : options.freeze(run));
    } finally {
      spares.release(inspector);
    }
  };
  return {
    patch: (request) => inspect("patch", request),
    changedFiles: async (request) => parseChangedFiles(await inspect("changed-files", request)),
    baselineDirectories: async (request) =>
      parseBaselineDirectories(await inspect("baseline-directories", request)),
    prepare: () => void spares.prepare(),
    dispose: () => spares.dispose(),
  };
}
