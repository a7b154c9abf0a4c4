export {
  fixTests,
  type FixTestsOptions,
  type FixTestsResult,
  type FixTestsStatus,
  type TestRun,
} from "./fix-tests.js";
export { protectedKind, type ProtectedKind } from "./protected-files.js";
