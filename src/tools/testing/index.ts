/** Test doubles for code that uses tools or sandboxes (not part of the library surface). */
export {
  MemoryFiles,
  MemorySandbox,
  MemoryProcessTable,
  type ExecScript,
  type MemorySandboxOptions,
  type ScriptedChunk,
  type ScriptedExec,
  type RecordedCall,
  type RecordedMethod,
} from "./memory-sandbox.js";
export { toolHarness } from "./harness.js";
