export * from "./types.js";
export { parsePatch } from "./parse-patch.js";
export { applyHunks, type ApplyHunksResult, type HunkFailure } from "./apply-hunks.js";
export { createUnifiedDiff, type CreateDiffOptions } from "./create-diff.js";
