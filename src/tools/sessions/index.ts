export {
  sessionTools,
  sessionsHistoryTool,
  sessionsListTool,
  sessionsSendTool,
  sessionsSpawnTool,
} from "./session-tools.js";
export type {
  ChildRunResult,
  HistoryEntry,
  SendRequest,
  SessionCallOptions,
  SessionHistory,
  SessionListing,
  SessionToolHost,
  SpawnRequest,
  SubagentCleanup,
  SubagentOutcome,
} from "./session-tool-host.js";
