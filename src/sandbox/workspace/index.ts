export {
  checkAgentWorkspaceAccess,
  ensurePrivateWorkspace,
  seedClosedCopy,
  type ClosedSeed,
  type PrivateWorkspace,
  type PrivateWorkspaceOptions,
  type SeedInfo,
} from "./private-workspace.js";
export {
  baselineGitDir,
  isInside,
  privateWorkspacePath,
  privateWorkspaceRoot,
  seedMarkerPath,
  seedTempPrefix,
  workspacesFolder,
} from "./paths.js";
export {
  attachWorkspaceDisk,
  diskBudgetSupport,
  diskImagePath,
  notEnforcedWarning,
  overrideDiskBudgetSupport,
  releaseWorkspaceDisk,
  releaseWorkspaceDisksBelow,
  unmountWorkspaceDisk,
  WorkspaceDisk,
  workspaceDiskFor,
  type DiskBudgetSupport,
} from "./disk-budget.js";
export { handOverWorkspace } from "./hand-over.js";
export { forkBaseline } from "./fork-baseline.js";
export { removeWrittenTree } from "./remove-written-tree.js";
export { fingerprintNow, SourceFingerprint } from "./source-fingerprint.js";
export { mountCountAt, parseMountPoints } from "./mount-table.js";
export {
  DiskBudgetExceededError,
  DiskWatchdog,
  defaultWatchdogIntervalMs,
} from "./disk-watchdog.js";
export { listGitFiles } from "./git-files.js";
export type { SeedSink, StreamedEntryHeader } from "./seed-stream.js";
export {
  CopyLimitError,
  TreeCopier,
  type CopySummary,
  type TreeCopierOptions,
} from "./tree-copy.js";
export { parseContainerUser, processUid, type Owner } from "./owner.js";
export {
  assertHasBaseline,
  baselinePathspecs,
  baselineRef,
  openBaselineTo,
  parseBaselineDirectories,
  parseChangedFiles,
  recordBaseline,
  type RecordBaselineOptions,
} from "./baseline.js";
export {
  carryExcludePatterns,
  carryInto,
  describeCarry,
  type CarryOptions,
  type CarrySummary,
} from "./carry.js";
export {
  carryLeftovers,
  carrySnapshotPath,
  releaseCarryLayers,
  removeCarryLeftover,
  type CarryLeftover,
} from "./carry-layers.js";
export type { WorkspaceChanges, WorkspaceChangesOptions } from "./workspace-changes.js";
export {
  checkpointStoreDir,
  openCheckpointStore,
  type CopyState,
  type RecordedCopy,
  type RecordStateOptions,
  type TreePair,
  type WorkspaceCheckpoints,
} from "./workspace-checkpoints.js";
