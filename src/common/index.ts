export * from "./errors.js";
export * from "./abort.js";
export * from "./exit-cleanup.js";
export * from "./logger.js";
export * from "./paths.js";
export * from "./process-identity.js";
export * from "./atomic-file.js";
export * from "./exclusive-file.js";
export { canonicalJson, hashOf } from "./config-hash.js";
export * from "./stop-signal.js";
export { freezeDeep } from "./freeze-deep.js";
export { quoteShellArg, shellCommand } from "./shell-quote.js";
// Not here: process-lock.ts, imported by path. It loads zod, and `cordon --version` and `--help`
// load this index (installed-package.integration.test.ts holds them to commander alone).
export { LruMap } from "./lru-map.js";
