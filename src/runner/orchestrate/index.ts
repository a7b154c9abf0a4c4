export { refusalFor } from "./tool-refusal.js";
export type { AgentRuntime, AgentRuntimeRun } from "./agent-runtime.js";
export type {
  ProvideSandboxOptions,
  SandboxProgress,
  SandboxProvider,
} from "./sandbox-provider.js";
export {
  bindToolset,
  failedRun,
  failedRunResult,
  planEvent,
  planToolset,
  runTask,
  type RunTaskOptions,
  type RunnerEvent,
} from "./run-task.js";
export { defaultSandboxes, type DefaultSandboxesOptions } from "./default-sandboxes.js";
export { callTool, type CallToolOptions } from "./call-tool.js";
export {
  disposeSandbox,
  type SandboxDisposal,
  type SandboxDisposalMode,
} from "./dispose-sandbox.js";
export {
  forwardLeasePort,
  parsePortMapping,
  startPortForward,
  type PortForward,
  type PortForwardOptions,
  type SandboxPortForward,
  type SandboxPortForwardRequest,
} from "./port-forward.js";
export {
  runSetupPhase,
  setupBeforeRun,
  setupFailureMessage,
  type SetupPhase,
  type SetupRun,
  type SetupSandboxes,
} from "./setup-phase.js";
export {
  checkpointSession,
  rollbackNote,
  rollbackSession,
  seededCopyOf,
  sessionCheckpointCalls,
  sessionCheckpoints,
  type SessionCheckpointsContext,
  type SessionRollback,
} from "./session-checkpoints.js";
export {
  assertForkName,
  forkKeptPhase,
  forkNames,
  forkSession,
  forkSessionSandbox,
  maxForkCount,
  type ForkSandboxRequest,
  type ForkSessionRequest,
  type SessionFork,
} from "./session-forks.js";
export {
  turnCheckpointHooks,
  type TurnCheckpointEvent,
  type TurnCheckpointHooks,
} from "./turn-checkpoints.js";
export { runEndEvent, runStartEvent, turnlessRunResult } from "./run-frame.js";
