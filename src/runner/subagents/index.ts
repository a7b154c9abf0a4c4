export {
  createSessionHost,
  type ChildRunRequest,
  type SessionHostOptions,
} from "./session-host.js";
export {
  readRunRecords,
  runRecordsDirectory,
  writeRunRecord,
  type SubagentRunRecord,
} from "./run-records.js";
