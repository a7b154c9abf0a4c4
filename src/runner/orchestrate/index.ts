export { refusalFor, type PlannedRun, type PlannedToolDecision } from "./planned-run.js";
export type {
  AcquireOptions,
  SandboxLease,
  SandboxProgress,
  SandboxProvider,
} from "./sandbox-provider.js";
export { runTask, type RunTaskOptions, type RunnerEvent } from "./run-task.js";
