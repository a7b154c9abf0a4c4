export { JsonlSession, SessionCorruptError, readSessionEntries } from "./jsonl-session.js";
export { appendSessionNote } from "./session-note.js";
export type { AppendMeta, OpenSessionOptions } from "./jsonl-session.js";
export {
  listSessions,
  sessionDetails,
  type SessionDetails,
  type SessionSummary,
} from "./list-sessions.js";
export { AsyncLimiter, SessionLanes, type Release, type SessionLanesOptions } from "./lanes.js";
export {
  sessionFileName,
  sessionFilePath,
  sessionFiles,
  sessionKeyOf,
  sessionsDirectory,
  sessionsRoot,
} from "./session-name.js";
export type { SessionEntry } from "./session-line.js";
export {
  SessionBusyError,
  SessionLockError,
  acquireSessionLock,
  describeHolder,
  readSessionLock,
  sessionLockHolderSchema,
  type AcquireSessionLockOptions,
  type SessionLock,
  type SessionLockHolder,
} from "./session-lock.js";
export { syntheticToolResult, type TranscriptItem } from "./transcript.js";
export {
  RunEventsLog,
  readRunEvents,
  runEventRecordSchema,
  runEventsFileInfo,
  type RunEventRecord,
} from "./run-events-log.js";
export {
  listLockedSessions,
  listWaitingRuns,
  readRunActivity,
  summarizeRun,
  type LockedSession,
  type RunActivity,
  type WaitingRun,
} from "./active-runs.js";
export { findSession, type FindSessionOptions } from "./find-session.js";
export { sandboxesHeld, sandboxesHeldByRuns, type HeldSandboxes } from "./held-sandboxes.js";
export {
  describeForward,
  liveForwards,
  recordForward,
  type ForwardRecord,
} from "./forward-records.js";
