export * from "./docker/index.js";
export * from "./changes-records/index.js";
export * from "./host/index.js";
export * from "./lease.js";
export * from "./sandbox.js";
export * from "./spec.js";
export * from "./workspace/index.js";
