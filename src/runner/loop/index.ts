export {
  runAgentLoop,
  type AgentLoopOptions,
  type FallbackModel,
  type LoopSession,
  type RunLimits,
} from "./agent-loop.js";
export { chooseCut, compactTranscript, estimateTokens } from "./compaction.js";
export type { CompactOptions, CompactResult } from "./compaction.js";
export { MessageQueue } from "./message-queue.js";
export type { MessageSource, RunIO } from "./run-io.js";
export {
  exitCodeForStatus,
  type RunEvent,
  type RunResult,
  type RunStatus,
  type RunUsage,
} from "./run-events.js";
export {
  defaultToolOutputLimits,
  lastShownLines,
  shownLine,
  ToolOutputStream,
  type ToolOutputEvent,
  type ToolOutputLimits,
} from "./tool-output.js";
export { buildSystemPrompt } from "./system-prompt.js";
export type {
  BootstrapFile,
  RuntimeFacts,
  SandboxFacts,
  SystemPromptMode,
  SystemPromptOptions,
  SystemPromptToolInfo,
} from "./system-prompt.js";
export {
  defaultRecoveryLimits,
  isRoleOrderingError,
  isThinkingError,
  nextRecovery,
  type Recovery,
  type RecoveryLimits,
  type RecoveryState,
} from "./recovery.js";
export {
  isThinkingLevel,
  lowerThinking,
  maxTokensFor,
  thinkingBudgets,
  thinkingLevels,
  thinkingOptionsOf,
  type ThinkingLevel,
  type ThinkingSetting,
} from "./thinking.js";
export {
  executeToolCall,
  ToolCallDeadline,
  refusalOf,
  type ToolCallOutcome,
  type RunnerToolset,
  type RunnerToolSpec,
  type ToolCallContext,
} from "./tool-executor.js";
