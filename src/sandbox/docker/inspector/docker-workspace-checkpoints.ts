import { SandboxError } from "../../../common/index.js";
import {
  assertHasBaseline,
  baselinePathspecs,
  openBaselineTo,
  openCheckpointStore,
  parseChangedFiles,
  parseContainerUser,
  type CopyState,
  type RecordStateOptions,
  type TreePair,
  type WorkspaceCheckpoints,
} from "../../workspace/index.js";
import { idleAt, idleThroughout, type SandboxQuiet } from "../sandbox-quiet.js";
import { spareInspector } from "./spare-inspector.js";
import {
  comparePairs,
  type CheckpointIndexUse,
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
  /** Asks the sandbox's executor what runs in it (`SandboxQuiet`); undefined: unknown. */
  quiet?: (() => Promise<SandboxQuiet | undefined>) | undefined;
  /**
   * The resident executor's support volume, if the sandbox uses one: recording inspectors run it,
   * so a record is one frame on an open stream rather than a Docker exec (`StartInspectorOptions`).
   */
  executorVolume?: (() => Promise<string | undefined>) | undefined;
}

/** Checkpoints of a Docker sandbox's copy, with a spare recorder kept warm once prepared. */
export interface DockerWorkspaceCheckpoints extends WorkspaceCheckpoints {
  /**
   * Records are coming (one per turn): starts a spare recording inspector now, and another after
   * each record until `dispose`, so a record pays only its exec and the pause, not a container
   * start. Resolves once the spare is ready; never rejects.
   */
  prepare(): Promise<void>;
  dispose(): Promise<void>;
}

/**
 * Records and restores a private copy's states through inspector containers (checkpoint-copy.sh),
 * the sandbox frozen while one runs over the copy (a turn's record only when something runs in
 * it: see `record`): what is recorded is one state, and nothing the agent started can write
 * between the restore's reading and its writing. A record's inspector
 * mounts the copy read-only and only the store writable; a restore's mounts the copy writable.
 */
export function dockerWorkspaceCheckpoints(
  options: DockerWorkspaceCheckpointsOptions,
): DockerWorkspaceCheckpoints {
  const { inspectors } = options;
  let store: Promise<string> | undefined;

  /** The target with its store, made and given to the sandbox user once. */
  const target = async (): Promise<InspectedWorkspace> => {
    const { workspace, user } = options.target;
    store ??= (async () => {
      await assertHasBaseline(workspace);
      // In volumes, the store is a volume of the sandbox user's, made with the copy.
      if (options.target.volumes) return options.target.volumes.checkpoints;
      const owner = parseContainerUser(user);
      if (owner) await openBaselineTo(workspace, owner);
      return openCheckpointStore(workspace, owner);
    })();
    store.catch(() => {
      store = undefined;
    });
    return { ...options.target, checkpointStore: await store };
  };
  const start = async (access: InspectorAccess): Promise<Inspector> => {
    const inspected = await target();
    // A restore is rare and started cold: its executor would be one more start to wait for.
    // A record's recorder starts with its container (a spare's, a turn ahead of its record).
    return inspectors.start(inspected, {
      access,
      ahead: access === "record",
      executorVolume: access === "record" ? options.executorVolume : undefined,
    });
  };
  /** The spare records: a restore is rare and mounts the copy writable, so it starts its own. */
  const spares = spareInspector(() => start("record"));

  /** Runs one inspection, `around` it the pause (or, unpaused, what must follow it at once). */
  const inspect = async (
    mode: "record" | "restore",
    operand: string,
    index: CheckpointIndexUse,
    signal: AbortSignal | undefined,
    around: <T>(fn: () => Promise<T>) => Promise<T> = options.freeze,
  ): Promise<CopyState> => {
    const inspector = (mode === "record" ? await spares.take() : undefined) ?? (await start(mode));
    try {
      return parseCopyState(
        await around(() =>
          inspector.run({ mode, operand, index, pathspecs: baselinePathspecs(), signal }),
        ),
      );
    } finally {
      spares.release(inspector);
    }
  };

  /**
   * A record. Unpaused only when the sandbox was idle before it and stayed so (`idleThroughout`):
   * then nothing could write the copy meanwhile, and the index it may keep (checkpoint-copy.sh)
   * was stat'ed with no process alive. Otherwise paused, starting from the kept index but making
   * none; and when a process appeared during an unpaused record, that record and any index it
   * kept are thrown away and it is taken again, paused, hashing every file.
   */
  const record = async (request: RecordStateOptions): Promise<CopyState> => {
    const since = request.changes === false ? "none" : (request.since ?? "-");
    const before = request.unpausedWhenIdle ? await options.quiet?.() : undefined;
    if (!idleAt(before)) return inspect("record", since, "reuse", request.signal);
    let after: SandboxQuiet | undefined;
    const state = await inspect("record", since, "keep", request.signal, async (fn) => {
      const output = await fn();
      // Asked before anything else happens (the used inspector's removal, the next spare).
      after = await options.quiet?.();
      return output;
    });
    if (idleThroughout(before, after)) return state;
    return inspect("record", since, "fresh", request.signal);
  };
  /** Counts in one cold inspector that mounts only the baseline and the store. */
  const compare = async (
    pairs: readonly TreePair[],
    signal: AbortSignal | undefined,
  ): Promise<(number | undefined)[]> => {
    if (pairs.length === 0) return [];
    const stdin = comparePairs(pairs);
    const inspector = await inspectors.start(await target(), { access: "compare" });
    try {
      return parseCounts(
        await inspector.run({ mode: "compare", pathspecs: stdin, signal }),
        pairs.length,
      );
    } finally {
      await inspector.remove();
    }
  };
  return {
    record: async (request = {}) => {
      const state = await record(request);
      return { tree: state.tree, changed: request.changes === false ? undefined : state.changed };
    },
    compare: (pairs, request = {}) => compare(pairs, request.signal),
    restore: (tree, request = {}) => inspect("restore", tree, "reuse", request.signal),
    prepare: () => spares.prepare(),
    dispose: () => spares.dispose(),
  };
}

const treeId = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/**
 * checkpoint-copy.sh's output: `diff --raw -z` entries, then a tree id and a NUL (last: a record
 * writes the changes while git writes the tree). Strict: output that does not end in a NUL-ended
 * tree id ends the parse with an error.
 */
export function parseCopyState(output: Uint8Array): CopyState {
  const bytes = Buffer.from(output);
  const last = bytes.length - 1;
  const start = last < 0 ? -1 : bytes.lastIndexOf(0, last - 1) + 1;
  const tree = last < 0 || bytes[last] !== 0 ? "" : bytes.subarray(start, last).toString("latin1");
  if (!treeId.test(tree)) {
    throw new SandboxError("the state read from the copy is malformed", {
      fix: "run the command again; if it persists, report it with `git --version` of the sandbox image",
    });
  }
  return { tree, changed: parseChangedFiles(bytes.subarray(0, start)) };
}

/**
 * checkpoint-copy.sh `compare`'s output: a count or `-` (a tree no longer in the store) per
 * pair, one line each. Strict: anything else, or another number of lines, is an error.
 */
export function parseCounts(output: Uint8Array, pairs: number): (number | undefined)[] {
  const lines = Buffer.from(output).toString("latin1").split("\n");
  if (
    lines.pop() !== "" ||
    lines.length !== pairs ||
    !lines.every((line) => /^(?:\d{1,9}|-)$/.test(line))
  ) {
    throw new SandboxError("the counts of changes read from the checkpoint store are malformed", {
      fix: "run the command again; if it persists, report it with `git --version` of the sandbox image",
    });
  }
  return lines.map((line) => (line === "-" ? undefined : Number(line)));
}
