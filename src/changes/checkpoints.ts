import {
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  lstatSync,
  openSync,
  writeSync,
} from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import path from "node:path";

import { z } from "zod";

import { ConfigError, FileOperationError, LruMap, SandboxError } from "../common/index.js";
import { baselineGitDir, type WorkspaceCheckpoints } from "../sandbox/index.js";
import { CheckpointEntries } from "./checkpoint-entries.js";

/**
 * cordon's list of a private copy's checkpoints: which tree in the checkpoint store each name
 * means, when it was taken and why. The list is the host's own file, in cordon's baseline git dir
 * beside the copy (mounted read-only into inspectors, never into the agent's container), so a
 * name the user types is looked up here and never reaches git or a shell: only a hex tree id from
 * this list does. The trees themselves are written and read by inspector containers
 * (`WorkspaceCheckpoints`).
 */

/**
 * A checkpoint name: letters, digits, `.`, `_`, `-`, starting with a letter or digit, at most 64
 * characters — so no path (`../x`), option (`--upload-pack=…`), space or ref syntax can be one.
 */
const namePattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const treeIdPattern = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** Why a checkpoint was taken. */
export type CheckpointKind = "named" | "turn" | "rollback";

const checkpointSchema = z.object({
  v: z.literal(1),
  name: z.string().regex(namePattern),
  tree: z.string().regex(treeIdPattern),
  /** ISO 8601. */
  at: z.string(),
  kind: z.enum(["named", "turn", "rollback"]),
  /** The session that took it (a run's turns, a user's command). */
  sessionKey: z.string().optional(),
  /** Turn checkpoints: the state before this turn of the session's run ran its tools. */
  turn: z.number().int().positive().optional(),
  /**
   * Files that differ from the checkpoint before it (the baseline for the first). A turn's has
   * none in the file: a run does not count them (half of a record's work), a listing does
   * (`countCheckpointChanges`).
   */
  changedFiles: z.number().int().nonnegative().optional(),
});

/** One recorded state of a private copy. */
export type Checkpoint = z.infer<typeof checkpointSchema>;

/**
 * A turn whose checkpoint could not be recorded, in the list in its place, so `rollback --turn`
 * says so rather than silently going back one turn further. Lines without a tree: a reader that
 * does not know them skips them.
 */
const missedTurnSchema = z.object({
  v: z.literal(1),
  name: z.string().regex(namePattern),
  at: z.string(),
  kind: z.literal("turn"),
  sessionKey: z.string().optional(),
  turn: z.number().int().positive().optional(),
  /** Why the record failed. */
  missed: z.string(),
});

/** A turn without a checkpoint (`missedTurnSchema`). */
export type MissedTurn = z.infer<typeof missedTurnSchema>;

/** A line of the list: a checkpoint, or a turn that has none. */
export type CheckpointListEntry = Checkpoint | MissedTurn;

/** Whether a list entry is a turn whose record failed (no tree to return to). */
export function isMissedTurn(entry: CheckpointListEntry): entry is MissedTurn {
  return "missed" in entry;
}

/** Which checkpoint a rollback goes to: by name, or the state before the N-th last turn. */
export type CheckpointTarget = { name: string } | { turn: number };

/** The list's file: cordon's own, beside the store in the baseline git dir. */
export function checkpointListFile(privateWorkspace: string): string {
  return path.join(baselineGitDir(privateWorkspace), "cordon-checkpoints.jsonl");
}

/** Throws a usage error (exit 2) unless `name` can name a checkpoint. */
export function assertCheckpointName(name: string): void {
  if (namePattern.test(name) && !name.includes("..")) return;
  throw new ConfigError(
    `${JSON.stringify(name)} cannot name a checkpoint: use letters, digits, ".", "_" and "-", starting with a letter or digit (at most 64)`,
    { fix: "choose a name such as before-refactor or try-2" },
  );
}

/**
 * The copy's checkpoints, oldest first. A line that is not a checkpoint (a torn last write) is
 * skipped; the file is opened without following a link.
 */
export async function listCheckpoints(privateWorkspace: string): Promise<Checkpoint[]> {
  return (await readCheckpointList(privateWorkspace)).items.filter(
    (entry): entry is Checkpoint => !isMissedTurn(entry),
  );
}

/**
 * The entries with each checkpoint's count of changed files, those the list lacks (turns')
 * counted by `compare` (`WorkspaceCheckpoints.compare`) against the checkpoint before each, in one
 * call. A count that cannot be had (a tree gone from the store) stays undefined.
 */
export async function countCheckpointChanges(
  entries: readonly CheckpointListEntry[],
  compare: WorkspaceCheckpoints["compare"],
  options: { signal?: AbortSignal | undefined } = {},
): Promise<CheckpointListEntry[]> {
  const uncounted: { at: number; pair: [string | undefined, string] }[] = [];
  let before: string | undefined;
  entries.forEach((entry, at) => {
    if (isMissedTurn(entry)) return;
    if (entry.changedFiles === undefined) uncounted.push({ at, pair: [before, entry.tree] });
    before = entry.tree;
  });
  if (uncounted.length === 0) return [...entries];
  const counts = await compare(
    uncounted.map(({ pair }) => pair),
    options,
  );
  const counted = [...entries];
  uncounted.forEach(({ at }, index) => {
    const changedFiles = counts[index];
    if (changedFiles !== undefined) counted[at] = { ...(entries[at] as Checkpoint), changedFiles };
  });
  return counted;
}

/**
 * The copy's checkpoints and the turns that missed theirs (`isMissedTurn`), oldest first: what
 * `cordon checkpoints` shows, so a turn `rollback --turn` refuses is in the listing too. Turns'
 * counts of changed files are not in the list (`countCheckpointChanges`).
 */
export async function listCheckpointEntries(
  privateWorkspace: string,
): Promise<CheckpointListEntry[]> {
  return [...(await readCheckpointList(privateWorkspace)).items];
}

/**
 * What this process last read of a list: its file's identity and the entries of its whole lines.
 * A run reads the list twice a turn (the tree to compare with, the next name); parsing it whole
 * each time made a turn's checkpoint cost grow with the session's turns.
 */
interface ReadList {
  dev: bigint;
  ino: bigint;
  /** Bytes up to the end of the last whole line read: what `entries` holds. */
  parsedBytes: number;
  /** That line, newline included: still there, it says the file only grew since. */
  lastLine: Buffer;
  /** Size and mtime when read: a file that still has both is not read again. */
  size: bigint;
  mtimeNs: bigint;
  entries: CheckpointEntries;
}

/**
 * The lists this process read last, by file: a long-lived process (an MCP server, an embedder)
 * reads the lists of many copies over its life, and one forgotten is only read whole again.
 */
const readLists = new LruMap<string, ReadList>(32);

/**
 * The list as it is: checkpoints and the turns that missed theirs, oldest first. Served from what
 * this process read last while the file is the same one, unchanged (one lstat); grown by appends
 * (this process's or another's), only the new lines are read. Anything else (another file in its
 * place, a shorter one) is read whole again.
 */
async function readCheckpointList(privateWorkspace: string): Promise<CheckpointEntries> {
  const file = checkpointListFile(privateWorkspace);
  let known = readLists.get(file);
  // Synchronous: one system call, where a turn's record would wait on the thread pool.
  const stats = lstatSync(file, { bigint: true, throwIfNoEntry: false });
  if (!stats) {
    readLists.delete(file);
    return new CheckpointEntries();
  }
  if (
    known &&
    stats.isFile() &&
    stats.dev === known.dev &&
    stats.ino === known.ino &&
    stats.size === known.size &&
    stats.mtimeNs === known.mtimeNs
  ) {
    return known.entries;
  }
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    readLists.delete(file);
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return new CheckpointEntries();
    throw error;
  }
  try {
    const opened = await handle.stat({ bigint: true });
    if (!opened.isFile()) {
      readLists.delete(file);
      return new CheckpointEntries();
    }
    // Grown in place (its last line read is still where it was): only what follows is new.
    let text: Buffer | undefined;
    if (known && opened.dev === known.dev && opened.ino === known.ino) {
      const from = known.parsedBytes - known.lastLine.byteLength;
      const read = await readFrom(handle, from, Number(opened.size) - from);
      if (read.subarray(0, known.lastLine.byteLength).equals(known.lastLine)) {
        text = read.subarray(known.lastLine.byteLength);
      }
    }
    if (text === undefined) {
      known = undefined;
      text = await readFrom(handle, 0, Number(opened.size));
    }
    const lastNewline = text.lastIndexOf(0x0a);
    const whole = lastNewline + 1;
    const lines = text.subarray(0, whole);
    // Grown: the new lines go after the known ones, in place.
    const entries = (known?.entries ?? new CheckpointEntries()).add(
      parseListLines(lines.toString("utf8")),
    );
    // A last line without its newline (a write torn, or still under way) is read, not kept.
    const unfinished = parseListLines(text.subarray(whole).toString("utf8"));
    const parsedBytes = (known?.parsedBytes ?? 0) + whole;
    if (unfinished.length > 0 || parsedBytes + (text.byteLength - whole) !== Number(opened.size)) {
      readLists.delete(file);
      return entries.add(unfinished);
    }
    const previousLine = whole >= 2 ? lines.lastIndexOf(0x0a, whole - 2) + 1 : 0;
    readLists.set(file, {
      dev: opened.dev,
      ino: opened.ino,
      parsedBytes,
      lastLine:
        whole > 0
          ? Buffer.from(lines.subarray(previousLine))
          : (known?.lastLine ?? Buffer.alloc(0)),
      size: opened.size,
      mtimeNs: opened.mtimeNs,
      entries,
    });
    return entries;
  } finally {
    await handle.close();
  }
}

/** Up to `length` bytes of the file from `position` (fewer if it is shorter now). */
async function readFrom(handle: FileHandle, position: number, length: number): Promise<Buffer> {
  const bytes = Buffer.alloc(Math.max(0, length));
  let filled = 0;
  while (filled < bytes.byteLength) {
    const { bytesRead } = await handle.read(
      bytes,
      filled,
      bytes.byteLength - filled,
      position + filled,
    );
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return bytes.subarray(0, filled);
}

/** The entries of whole lines of the list; a line that is not one (torn, foreign) is skipped. */
function parseListLines(text: string): CheckpointListEntry[] {
  const entries: CheckpointListEntry[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      continue;
    }
    const checkpoint = checkpointSchema.safeParse(parsed);
    if (checkpoint.success) {
      entries.push(checkpoint.data);
      continue;
    }
    const missed = missedTurnSchema.safeParse(parsed);
    if (missed.success) entries.push(missed.data);
  }
  return entries;
}

/**
 * Appends one checkpoint: one write to a file opened O_APPEND, so concurrent writers interleave
 * whole lines. A turn's line is not synced: the tree it names is written by git without fsync
 * (loose objects are outside git's default core.fsync), so a synced line would not make the
 * checkpoint outlive a power loss, only name objects that may be gone; a line lost instead is
 * the same loss, and a torn one is skipped on reading. That fsync cost every turn a disk flush
 * (milliseconds, more on a busy disk). A named checkpoint and the state a rollback replaced are
 * synced: a person asked for them, once, and the flush is nothing beside that command's pause.
 * Written synchronously: three system calls on a local file take microseconds, where the same
 * calls through the thread pool cost a turn's record milliseconds on a busy machine.
 */
function appendCheckpoint(privateWorkspace: string, checkpoint: CheckpointListEntry): void {
  const line = isMissedTurn(checkpoint)
    ? missedTurnSchema.parse(checkpoint)
    : checkpointSchema.parse(checkpoint);
  const file = checkpointListFile(privateWorkspace);
  const fd = openSync(
    file,
    constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW,
    0o600,
  );
  try {
    const known = readLists.get(file);
    const bytes = Buffer.from(`${JSON.stringify(line)}\n`);
    writeSync(fd, bytes);
    if (checkpoint.kind !== "turn") fsyncSync(fd);
    // What this process read, and this line right after it: the next read need not open it.
    const after = fstatSync(fd, { bigint: true });
    if (
      known &&
      BigInt(known.parsedBytes) === known.size &&
      after.dev === known.dev &&
      after.ino === known.ino &&
      after.size === known.size + BigInt(bytes.byteLength)
    ) {
      readLists.set(file, {
        ...known,
        parsedBytes: Number(after.size),
        lastLine: bytes,
        size: after.size,
        mtimeNs: after.mtimeNs,
        // In place: copying the list each turn made a session's turns cost n² in all.
        entries: known.entries.add([line]),
      });
    }
  } finally {
    closeSync(fd);
  }
}

/** What checkpoints are taken from and restored into: a held sandbox with a private copy. */
export interface CheckpointSource {
  /** Host path of the sandbox's private workspace (the seeded copy). */
  privateWorkspace?: string | undefined;
  /** The backend's recorder of the copy's states (`ProvidedSandbox.checkpoints`). */
  checkpoints?: WorkspaceCheckpoints | undefined;
}

export interface CreateCheckpointOptions {
  /** Its name; default `cp-<n>` (`turn-<n>` for a turn's). Must be new for a named one. */
  name?: string | undefined;
  /** Default `named`. */
  kind?: CheckpointKind | undefined;
  sessionKey?: string | undefined;
  /** For a turn checkpoint: its turn number; default the one in its name (`turn-<n>`). */
  turn?: number | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * Records the copy's state now as a checkpoint (through the backend: a throwaway container, the
 * sandbox frozen) and adds it to the list.
 */
export async function createCheckpoint(
  source: CheckpointSource,
  options: CreateCheckpointOptions = {},
): Promise<Checkpoint> {
  const kind = options.kind ?? "named";
  if (options.name !== undefined) assertCheckpointName(options.name);
  if (kind === "named" && options.name !== undefined) {
    const name = options.name;
    const earlier = await listCheckpoints(checkpointerOf(source).workspace);
    if (earlier.some((checkpoint) => checkpoint.name === name)) {
      throw new ConfigError(`the checkpoint ${name} exists already`, {
        fix: "choose another name; `cordon checkpoints` lists the taken ones",
      });
    }
  }
  const state = await recordCheckpointState(source, { kind, signal: options.signal });
  return keepCheckpoint(source, state, options);
}

/** A state of the copy, recorded but not yet a checkpoint in the list (`keepCheckpoint`). */
export interface RecordedCheckpointState {
  /** Its git tree id (hex). */
  tree: string;
  /**
   * Files that differ from the newest checkpoint when it was recorded (the baseline if none);
   * not counted for a turn's (`Checkpoint.changedFiles`).
   */
  changedFiles?: number | undefined;
}

/**
 * Records the copy's state now, through the backend (a throwaway container; the sandbox frozen,
 * or for a turn's, unpaused when nothing runs in it), without adding it to the list: a run
 * records a turn's state while the model answers, and keeps it only once a turn's tools follow.
 */
export async function recordCheckpointState(
  source: CheckpointSource,
  options: { kind?: CheckpointKind | undefined; signal?: AbortSignal | undefined } = {},
): Promise<RecordedCheckpointState> {
  const { workspace, checkpoints } = checkpointerOf(source);
  // A turn's is taken inside a run that holds the sandbox (turn-checkpoints.ts), uncounted.
  const turn = options.kind === "turn";
  // From the end: a record does not go over the whole list.
  const newest = turn
    ? undefined
    : (await readCheckpointList(workspace)).items.findLast(
        (entry): entry is Checkpoint => !isMissedTurn(entry),
      );
  const state = await checkpoints.record({
    since: newest?.tree,
    changes: !turn,
    unpausedWhenIdle: turn,
    signal: options.signal,
  });
  return { tree: state.tree, changedFiles: state.changed?.size };
}

/**
 * Adds a recorded state to the list as a checkpoint: named `options.name`, or the next
 * `turn-<n>` / `cp-<n>`. A turn checkpoint's number counts the turns recorded in this copy, across
 * runs, those that missed theirs included.
 */
export async function keepCheckpoint(
  source: CheckpointSource,
  state: RecordedCheckpointState,
  options: Omit<CreateCheckpointOptions, "signal"> = {},
): Promise<Checkpoint> {
  const { workspace } = checkpointerOf(source);
  const kind = options.kind ?? "named";
  const earlier = await readCheckpointList(workspace);
  const name = options.name ?? earlier.nextName(kind === "turn" ? "turn" : "cp");
  assertCheckpointName(name);
  const turn = options.turn ?? (kind === "turn" ? Number(/\d+$/.exec(name)?.[0]) : undefined);
  const checkpoint: Checkpoint = {
    v: 1,
    name,
    tree: state.tree,
    at: new Date().toISOString(),
    kind,
    ...(options.sessionKey !== undefined ? { sessionKey: options.sessionKey } : {}),
    ...(turn !== undefined && turn > 0 ? { turn } : {}),
    ...(state.changedFiles !== undefined ? { changedFiles: state.changedFiles } : {}),
  };
  appendCheckpoint(workspace, checkpoint);
  return checkpoint;
}

/**
 * Adds a turn that has no checkpoint to the list, under the next `turn-<n>`, with why: a
 * `rollback --turn` that reaches it says so instead of going back one turn further.
 */
export async function noteMissedTurn(
  source: CheckpointSource,
  options: { sessionKey?: string | undefined; reason: string },
): Promise<MissedTurn> {
  const { workspace } = checkpointerOf(source);
  const name = (await readCheckpointList(workspace)).nextName("turn");
  const turn = Number(/\d+$/.exec(name)?.[0]);
  const missed: MissedTurn = {
    v: 1,
    name,
    at: new Date().toISOString(),
    kind: "turn",
    ...(options.sessionKey !== undefined ? { sessionKey: options.sessionKey } : {}),
    ...(turn > 0 ? { turn } : {}),
    missed: options.reason,
  };
  appendCheckpoint(workspace, missed);
  return missed;
}

/** What a rollback did. */
export interface RollbackOutcome {
  /** The checkpoint the copy now matches. */
  restored: Checkpoint;
  /** The state it replaced, kept as a checkpoint (`before-rollback-<n>`): roll back to it to undo. */
  saved: Checkpoint;
  /** Paths that changed, each with what it is now (`<mode> <id>` or `deleted`). */
  changed: Map<string, string>;
}

/**
 * Puts the copy back to a checkpoint (through the backend, the sandbox frozen), after keeping the
 * state it replaces as a checkpoint of its own. The caller makes sure no run uses the sandbox.
 */
export async function rollbackToCheckpoint(
  source: CheckpointSource,
  target: CheckpointTarget,
  options: { sessionKey?: string | undefined; signal?: AbortSignal | undefined } = {},
): Promise<RollbackOutcome> {
  const { workspace, checkpoints } = checkpointerOf(source);
  const earlier = await readCheckpointList(workspace);
  const restored = findCheckpoint(earlier.items, target, options.sessionKey);
  const state = await checkpoints.restore(restored.tree, { signal: options.signal });
  const saved: Checkpoint = {
    v: 1,
    name: earlier.nextName("before-rollback"),
    tree: state.tree,
    at: new Date().toISOString(),
    kind: "rollback",
    ...(options.sessionKey !== undefined ? { sessionKey: options.sessionKey } : {}),
    changedFiles: state.changed.size,
  };
  appendCheckpoint(workspace, saved);
  return { restored, saved, changed: state.changed };
}

/**
 * The checkpoint a target names. `{turn: -N}` is the state before the N-th last turn that ran
 * tools in `sessionKey` (every session's turns when it has none): -1 undoes the last turn.
 */
export function findCheckpoint(
  entries: readonly CheckpointListEntry[],
  target: CheckpointTarget,
  sessionKey?: string,
): Checkpoint {
  const checkpoints = entries.filter((entry): entry is Checkpoint => !isMissedTurn(entry));
  if ("name" in target) {
    const found = checkpoints.findLast((checkpoint) => checkpoint.name === target.name);
    if (found) return found;
    throw new ConfigError(`no checkpoint named ${JSON.stringify(target.name)}`, {
      fix:
        checkpoints.length === 0
          ? "this copy has no checkpoints yet: take one with `cordon checkpoint NAME` (runs take one per turn unless sandbox.checkpoints is off)"
          : `\`cordon checkpoints\` lists them (${describeNames(checkpoints)})`,
    });
  }
  if (!Number.isInteger(target.turn) || target.turn >= 0) {
    throw new ConfigError(`--turn takes a negative whole number, not ${target.turn}`, {
      fix: "--turn -1 undoes the last turn, --turn -2 the last two",
    });
  }
  const all = entries.filter((entry) => entry.kind === "turn");
  const ofSession = all.filter((entry) => entry.sessionKey === sessionKey);
  const turns = ofSession.length > 0 ? ofSession : all;
  const found = turns.at(target.turn);
  if (found && isMissedTurn(found)) {
    const earlier = turns.slice(0, target.turn).findLast((entry) => !isMissedTurn(entry));
    throw new ConfigError(
      `${found.name} has no checkpoint: recording it failed (${found.missed}), so --turn ${target.turn} cannot undo exactly that turn`,
      {
        fix: earlier
          ? `--turn -${turns.length - turns.lastIndexOf(earlier)} goes back to ${earlier.name}, the newest checkpoint before it, undoing the turns since then too; \`cordon checkpoints\` lists what there is`
          : "no earlier turn has a checkpoint; `cordon checkpoints` lists what there is",
      },
    );
  }
  if (found) return found;
  throw new ConfigError(
    turns.length === 0
      ? "no turn checkpoints: no run has taken one in this copy"
      : `only ${turns.length} turn checkpoint(s), so --turn ${target.turn} goes back too far`,
    {
      fix:
        turns.length === 0
          ? 'runs take one before each turn\'s tools unless sandbox.checkpoints is "off"; `cordon checkpoints` lists what there is'
          : `use --turn -${turns.length} for the earliest, or name one from \`cordon checkpoints\``,
    },
  );
}

function describeNames(checkpoints: readonly Checkpoint[]): string {
  const names = checkpoints.map((checkpoint) => checkpoint.name);
  return names.length <= 8
    ? names.join(", ")
    : `${names.slice(-8).join(", ")} and ${names.length - 8} earlier`;
}

/** The source's copy and recorder, or the error that says why it has none. */
function checkpointerOf(source: CheckpointSource): {
  workspace: string;
  checkpoints: WorkspaceCheckpoints;
} {
  if (!source.privateWorkspace) {
    throw new FileOperationError(
      "this sandbox has no private workspace, so it has no checkpoints",
      "not_found",
      "/workspace",
      {
        fix: 'checkpoints work on seeded private copies (sandbox.workspaceAccess "none" with seed on); with rw the agent writes your workspace itself: use git there',
      },
    );
  }
  if (!source.checkpoints) {
    throw new SandboxError("this sandbox cannot record or restore its copy safely", {
      fix: "use the Docker sandbox backend: it freezes the sandbox and touches the copy only in a throwaway container",
    });
  }
  return { workspace: source.privateWorkspace, checkpoints: source.checkpoints };
}
