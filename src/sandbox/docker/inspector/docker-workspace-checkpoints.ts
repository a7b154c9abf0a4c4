import { SandboxError } from "../../../common/index.js";
import {
  assertHasBaseline,
  baselinePathspecs,
  openBaselineTo,
  openCheckpointStore,
  parseChangedFiles,
  parseContainerUser,
  type CopyState,
  type WorkspaceCheckpoints,
} from "../../workspace/index.js";
import {
  defaultInspectionTimeoutMs,
  type InspectedWorkspace,
  type Inspector,
  type InspectorAccess,
  type WorkspaceInspectors,
} from "./workspace-inspector.js";

export interface DockerWorkspaceCheckpointsOptions {
  inspectors: WorkspaceInspectors;
  target: InspectedWorkspace;
  /** Runs `fn` with every process of the sandbox paused (`SandboxLease.freeze`). */
  freeze: <T>(fn: () => Promise<T>) => Promise<T>;
}

/** Checkpoints of a Docker sandbox's copy, with a spare recorder kept warm once prepared. */
export interface DockerWorkspaceCheckpoints extends WorkspaceCheckpoints {
  /**
   * Records are coming (one per turn): starts a spare recording inspector now, and another after
   * each record until `dispose`, so a record pays only its exec and the pause, not a container
   * start.
   */
  prepare(): void;
  dispose(): Promise<void>;
}

/**
 * Records and restores a private copy's states through inspector containers (checkpoint-copy.sh),
 * the sandbox frozen while one runs over the copy: what is recorded is one state, and nothing the
 * agent started can write between the restore's reading and its writing. A record's inspector
 * mounts the copy read-only and only the store writable; a restore's mounts the copy writable.
 */
export function dockerWorkspaceCheckpoints(
  options: DockerWorkspaceCheckpointsOptions,
): DockerWorkspaceCheckpoints {
  const { inspectors } = options;
  let store: Promise<string> | undefined;
  let spare: { inspector: Promise<Inspector>; startedAt: number } | undefined;
  let prepared = false;
  let disposed = false;
  const removals = new Set<Promise<void>>();
  const removeLater = (inspector: Inspector | Promise<Inspector>): void => {
    const removal = Promise.resolve(inspector)
      .then((started) => started.remove())
      .catch(() => undefined)
      .finally(() => removals.delete(removal));
    removals.add(removal);
  };

  /** The target with its store, made and given to the sandbox user once. */
  const target = async (): Promise<InspectedWorkspace> => {
    const { workspace, user } = options.target;
    store ??= (async () => {
      await assertHasBaseline(workspace);
      const owner = parseContainerUser(user);
      if (owner) await openBaselineTo(workspace, owner);
      return openCheckpointStore(workspace, owner);
    })();
    store.catch(() => {
      store = undefined;
    });
    return { ...options.target, checkpointStore: await store };
  };
  const startSpare = (): void => {
    const inspector = target().then((inspected) =>
      inspectors.start(inspected, { access: "record" }),
    );
    inspector.catch(() => undefined);
    spare = { inspector, startedAt: Date.now() };
  };
  const take = async (access: InspectorAccess): Promise<Inspector> => {
    const taken = access === "record" ? spare : undefined;
    if (taken) spare = undefined;
    if (taken && Date.now() - taken.startedAt < defaultInspectionTimeoutMs / 2) {
      const inspector = await taken.inspector.catch(() => undefined);
      if (inspector) return inspector;
    } else if (taken) {
      removeLater(taken.inspector);
    }
    return inspectors.start(await target(), { access });
  };

  const inspect = async (
    mode: "record" | "restore",
    operand: string,
    signal: AbortSignal | undefined,
  ): Promise<CopyState> => {
    const inspector = await take(mode);
    try {
      const output = await options.freeze(() =>
        inspector.run({ mode, operand, pathspecs: baselinePathspecs(), signal }),
      );
      return parseCopyState(output);
    } finally {
      removeLater(inspector);
      if (mode === "record" && prepared && !disposed) startSpare();
    }
  };
  return {
    record: (request = {}) => inspect("record", request.since ?? "-", request.signal),
    restore: (tree, request = {}) => inspect("restore", tree, request.signal),
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

const treeId = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/**
 * checkpoint-copy.sh's output: a tree id, a NUL, then `diff-tree --raw -z` entries. Strict: a
 * first field that is not a tree id ends the parse with an error.
 */
export function parseCopyState(output: Uint8Array): CopyState {
  const bytes = Buffer.from(output);
  const end = bytes.indexOf(0);
  const tree = end < 0 ? "" : bytes.subarray(0, end).toString("latin1");
  if (!treeId.test(tree)) {
    throw new SandboxError("the state read from the copy is malformed", {
      fix: "run the command again; if it persists, report it with `git --version` of the sandbox image",
    });
  }
  return { tree, changed: parseChangedFiles(bytes.subarray(end + 1)) };
}
