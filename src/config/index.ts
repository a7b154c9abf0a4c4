/** The config file: schema, loading and layering (DESIGN.md §4, docs/configuration.md). */
export * from "./schema.js";
export { agentIdMaxLength, normalizeAgentId } from "./agent-id.js";
export {
  loadConfig,
  parseConfig,
  resolveConfigPath,
  defaultConfigFileName,
  userConfigPath,
  readConfigFile,
  looseningKeysOfFile,
  type ConfigFileContents,
  type ConfigOverrides,
  type LoadConfigOptions,
  type LoadedConfig,
} from "./load-config.js";
export { configEnvironment } from "./env-layer.js";
export {
  checkEnvironment,
  environmentVariables,
  type CheckedEnvironment,
  type EnvironmentVariable,
} from "./environment.js";
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
export { hostEntryKind, hostRealpath, hostPathOwner, hostProcessOwner } from "./host-paths.js";
export { formatConfigJson5 } from "./format.js";
export {
  configLocation,
  displayPath,
  formatKeyValue,
  lookUpTrust,
  sha256Of,
  trustConfigFile,
  untrustConfigFile,
  UntrustedConfigError,
  type ConfigOrigin,
  type ConfigSource,
} from "./config-trust.js";
export { looseningKeys, untrustedKeyRules, type LooseningKey } from "./loosening-keys.js";
export { trustStorePath } from "./trust-store.js";
export { formatByteSize, parseByteSize } from "./byte-size.js";
export { carryPathProblem, normalizeCarryPath } from "./carry-path.js";
export { starterConfigText } from "./starter-config.js";
