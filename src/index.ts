/**
 * cordon as a library (docs/library.md): `createRunner` is the path `cordon run` takes — config,
 * policy plan, sandbox by scope, tools, session, agent loop — and the pieces it is made of are
 * exported for embedders who need one of them on its own.
 */

// Runs and their events.
export {
  createRunner,
  type PlanRequest,
  type RunRequest,
  type Runner,
  type RunnerOptions,
} from "./runner/create-runner.js";
export {
  createSandbox,
  type CordonSandbox,
  type CreateSandboxOptions,
} from "./runner/create-sandbox.js";
export {
  MessageQueue,
  exitCodeForStatus,
  type RunEvent,
  type RunLimits,
  type RunResult,
  type RunStatus,
  type RunUsage,
  type ToolOutputEvent,
} from "./runner/loop/index.js";
export type {
  ForkSandboxRequest,
  ForkSessionRequest,
  ProvideSandboxOptions,
  RunnerEvent,
  SandboxDisposal,
  SandboxDisposalMode,
  SandboxProvider,
  SessionFork,
  SetupPhase,
} from "./runner/orchestrate/index.js";

// Models.
export {
  AnthropicModelClient,
  ScriptedModelClient,
  createModelClient,
  type ModelClient,
  type RunCost,
} from "./runner/model/index.js";

// Tools: custom tools are defined like the built-in ones.
export {
  builtinTools,
  defineTool,
  errorResult,
  textResult,
  type ToolContext,
  type ToolDefinition,
  type ToolResult,
} from "./tools/index.js";

// Configuration and policy (pure): what `cordon sandbox explain` prints.
export { loadConfig, type CordonConfig } from "./config/index.js";
export {
  explainPlan,
  planRun,
  type PlannedLimits,
  type RunLimitsRequest,
  type RunPlan,
} from "./policy/index.js";

// Sandboxes.
// A Sandbox is exec + files + processes (docs/library.md); the option and result types let an
// embedder write its own backend against the same interface.
export type {
  DirEntry,
  ExecOptions,
  ExecResult,
  FileStat,
  FileType,
  ListOptions,
  ListResult,
  ProcessInfo,
  ProcessOutput,
  ProcessTable,
  ReadFileOptions,
  RemoveOptions,
  ForwardedPort,
  Sandbox,
  SandboxFiles,
  SandboxLease,
  SignalOption,
  WriteFileOptions,
} from "./sandbox/index.js";

// Whole jobs.
export {
  findTestCommand,
  fixTests,
  seededAttemptCopies,
  type AttemptCopies,
  type AttemptReport,
  type FixTestsEvent,
  type FixTestsOptions,
  type FixTestsResult,
  type FoundTestCommand,
} from "./workflows/index.js";
export {
  PatchParseError,
  applyChanges,
  countCheckpointChanges,
  createCheckpoint,
  isMissedTurn,
  listCheckpointEntries,
  listCheckpoints,
  parsePatch,
  patchProblems,
  rollbackToCheckpoint,
  takeChanges,
  type Checkpoint,
  type CheckpointListEntry,
  type CheckpointTarget,
  type MissedTurn,
  type RollbackOutcome,
} from "./changes/index.js";

// Errors and exit codes.
export { CordonError, ExitCode, FileOperationError } from "./common/index.js";
export { ForkTargetExistsError } from "./sandbox/index.js";
