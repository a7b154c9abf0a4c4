/** Whole jobs built on the runner: fixing failing tests in CI. */
export * from "./fix-tests/index.js";
