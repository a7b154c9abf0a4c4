import {
  assertHasBaseline,
  baselinePathspecs,
  openBaselineTo,
  parseChangedFiles,
  parseContainerUser,
  type WorkspaceChanges,
  type WorkspaceChangesOptions,
} from "../../workspace/index.js";
import type {
  InspectedWorkspace,
  InspectionMode,
  WorkspaceInspectors,
} from "./workspace-inspector.js";

export interface DockerWorkspaceChangesOptions {
  inspectors: WorkspaceInspectors;
  target: InspectedWorkspace;
  /** Runs `fn` with every process of the sandbox paused (`SandboxLease.freeze`). */
  freeze: <T>(fn: () => Promise<T>) => Promise<T>;
}

/**
 * The changes of a Docker sandbox's private copy: an inspector is started first (it only idles
 * until used, so the sandbox's pause stays short), then the sandbox is frozen while the inspector
 * reads the copy against cordon's baseline, so what is read is one state, not a moving target.
 */
export function dockerWorkspaceChanges(options: DockerWorkspaceChangesOptions): WorkspaceChanges {
  const inspect = async (
    mode: InspectionMode,
    request: WorkspaceChangesOptions = {},
  ): Promise<Buffer> => {
    const { target } = options;
    await assertHasBaseline(target.workspace);
    const owner = parseContainerUser(target.user);
    if (owner) await openBaselineTo(target.workspace, owner);
    const inspector = await options.inspectors.start(target, { timeoutMs: request.timeoutMs });
    try {
      return await options.freeze(() =>
        inspector.run({
          mode,
          pathspecs: baselinePathspecs(request.exclude),
          signal: request.signal,
          timeoutMs: request.timeoutMs,
        }),
      );
    } finally {
      await inspector.remove();
    }
  };
  return {
    patch: (request) => inspect("patch", request),
    changedFiles: async (request) => parseChangedFiles(await inspect("changed-files", request)),
  };
}
