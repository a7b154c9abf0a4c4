export * from "./errors.js";
export * from "./abort.js";
export * from "./exit-cleanup.js";
export * from "./logger.js";
export * from "./paths.js";
export * from "./process-identity.js";
export * from "./exclusive-file.js";
export { canonicalJson, hashOf } from "./config-hash.js";
export * from "./stop-signal.js";
