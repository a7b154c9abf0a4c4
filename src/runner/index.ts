export * from "./model/index.js";
export * from "./session/index.js";
export * from "./loop/index.js";
export * from "./orchestrate/index.js";
export * from "./create-runner.js";
export * from "./create-sandbox.js";
export * from "./subagents/index.js";
