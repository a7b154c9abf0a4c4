/**
 * Changes made in a seeded private workspace: recorded against a baseline at seeding, taken out
 * of the sandbox as one patch, read by one strict parser, checked, and applied to the real
 * workspace all or nothing.
 */
export {
  takeBaselineDirectories,
  takeChangedFiles,
  takeChanges,
  type ChangesSource,
  type TakeChangesOptions,
} from "./take-changes.js";
export { PatchParseError, parsePatch, type PatchedFile } from "./parse-git-patch.js";
export { patchProblems, type PatchProblem } from "./patch-problems.js";
export {
  ChangesConflictError,
  applyChanges,
  assertSafeChanges,
  changesAlreadyApplied,
  patchStat,
  type ApplyOutcome,
} from "./apply-changes.js";
export {
  ChangesNotReviewedError,
  forgetShownChanges,
  lastShownDigest,
  patchDigest,
  recordShownChanges,
} from "./reviewed-changes.js";
export { ForeignSeedError, assertSeededFrom } from "./seed-source.js";
export {
  assertCheckpointName,
  checkpointListFile,
  createCheckpoint,
  findCheckpoint,
  isMissedTurn,
  keepCheckpoint,
  countCheckpointChanges,
  listCheckpointEntries,
  listCheckpoints,
  noteMissedTurn,
  recordCheckpointState,
  rollbackToCheckpoint,
  type Checkpoint,
  type CheckpointKind,
  type CheckpointListEntry,
  type MissedTurn,
  type RecordedCheckpointState,
  type CheckpointSource,
  type CheckpointTarget,
  type CreateCheckpointOptions,
  type RollbackOutcome,
} from "./checkpoints.js";
