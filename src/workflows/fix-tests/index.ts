export {
  maxAttempts,
  seededAttemptCopies,
  type AttemptCopies,
  type AttemptEvent,
  type AttemptReport,
  type AttemptStatus,
} from "./attempts.js";
export {
  fixTests,
  type FixTestsEvent,
  type FixTestsOptions,
  type FixTestsResult,
  type FixTestsStatus,
  type TestRun,
} from "./fix-tests.js";
export { protectedKind, type ProtectedKind } from "./protected-files.js";
export { findTestCommand, testCommandSources, type FoundTestCommand } from "./test-command.js";
