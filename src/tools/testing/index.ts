/** Test doubles for code that uses tools or sandboxes (not part of the library surface). */
export {
  MemorySandbox,
  MemoryProcessTable,
  type ExecScript,
  type MemorySandboxOptions,
  type RecordedCall,
} from "./memory-sandbox.js";
export { toolHarness } from "./harness.js";
