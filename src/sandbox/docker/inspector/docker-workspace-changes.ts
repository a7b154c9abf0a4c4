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
import {
  defaultInspectionTimeoutMs,
  type InspectedWorkspace,
  type InspectionMode,
  type Inspector,
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
 * Once prepared, the next inspector is started in the background after each reading: fix-tests
 * reads a copy several times while it holds a sandbox, and a spare that has never run anything
 * over the copy holds no agent data yet (each inspection still gets a container no earlier one
 * touched). A reader nobody prepared (a prune's check) starts no spare it would only remove.
 */
export function dockerWorkspaceChanges(
  options: DockerWorkspaceChangesOptions,
): DockerWorkspaceChanges {
  const { target, inspectors } = options;
  let spare: { inspector: Promise<Inspector>; startedAt: number } | undefined;
  let disposed = false;
  let prepared = false;
  /** Removals of used inspectors, off the caller's path; `dispose` waits for them. */
  const removals = new Set<Promise<void>>();
  const removeLater = (inspector: Inspector | Promise<Inspector>): void => {
    const removal = Promise.resolve(inspector)
      .then((started) => started.remove())
      .catch(() => undefined)
      .finally(() => removals.delete(removal));
    removals.add(removal);
  };

  const startSpare = (): void => {
    const inspector = inspectors.start(target);
    // A spare that failed to start is simply not used.
    inspector.catch(() => undefined);
    spare = { inspector, startedAt: Date.now() };
  };
  /**
   * The spare if it has waited less than half a deadline (its container ends by itself after one
   * and a half: inspectorContainer), else a new one.
   */
  const take = async (timeoutMs: number | undefined): Promise<Inspector> => {
    const taken = spare;
    spare = undefined;
    const fresh = taken && Date.now() - taken.startedAt < defaultInspectionTimeoutMs / 2;
    if (taken && fresh && timeoutMs === undefined) {
      const inspector = await taken.inspector.catch(() => undefined);
      if (inspector) return inspector;
    } else if (taken) {
      removeLater(taken.inspector);
    }
    return inspectors.start(target, { timeoutMs });
  };

  const inspect = async (
    mode: InspectionMode,
    request: WorkspaceChangesOptions = {},
  ): Promise<Buffer> => {
    await assertHasBaseline(target.workspace);
    const owner = parseContainerUser(target.user);
    if (owner) await openBaselineTo(target.workspace, owner);
    const inspector = await take(request.timeoutMs);
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
      removeLater(inspector);
      if (prepared && !disposed) startSpare();
    }
  };
  return {
    patch: (request) => inspect("patch", request),
    changedFiles: async (request) => parseChangedFiles(await inspect("changed-files", request)),
    baselineDirectories: async (request) =>
      parseBaselineDirectories(await inspect("baseline-directories", request)),
    prepare: () => {
      prepared = true;
      if (!spare && !disposed) startSpare();
    },
    dispose: async () => {
      disposed = true;
      if (spare) removeLater(spare.inspector);
      spare = undefined;
      await Promise.all([...removals]);
    },
  };
}
