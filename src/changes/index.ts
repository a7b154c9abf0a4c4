/**
 * Changes made in a seeded private workspace: recorded against a baseline at seeding, taken out
 * of the sandbox as one patch, inspected, and applied to the real workspace all or nothing.
 */
export { takeChanges } from "./take-changes.js";
export {
  inspectPatch,
  patchProblems,
  type PatchedFile,
  type PatchProblem,
} from "./inspect-patch.js";
export { ChangesConflictError, applyChanges, type ApplyOutcome } from "./apply-changes.js";
