/** The config file: schema, loading and layering (DESIGN.md §4, docs/configuration.md). */
export * from "./schema.js";
export {
  loadConfig,
  parseConfig,
  resolveConfigPath,
  defaultConfigFileName,
  type ConfigOverrides,
  type LoadConfigOptions,
  type LoadedConfig,
} from "./load-config.js";
export { configEnvironment } from "./env-layer.js";
export {
  configErrorOf,
  ConfigValidationError,
  configIssuesOf,
  formatConfigIssues,
  formatConfigPath,
  type ConfigIssue,
} from "./issues.js";
export { mergeLayers } from "./merge.js";
export { configJsonSchema } from "./json-schema.js";
export { hostRealpath, hostPathOwner } from "./host-paths.js";
export { formatConfigJson5 } from "./format.js";
