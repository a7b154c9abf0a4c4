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
export {
  exitCodeForStatus,
  type RunEvent,
  type RunResult,
  type RunStatus,
  type RunUsage,
} from "./run-events.js";
export { buildSystemPrompt } from "./system-prompt.js";
export type {
  RuntimeFacts,
  SandboxFacts,
  SystemPromptOptions,
  SystemPromptToolInfo,
} from "./system-prompt.js";
export {
  executeToolCall,
  type RunnerToolset,
  type RunnerToolSpec,
  type ToolCallContext,
  type ToolResult,
} from "./tool-executor.js";
