export * from "./types.js";
export * from "./model-errors.js";
export {
  AnthropicModelClient,
  anthropicOptionsFromEnv,
  type AnthropicModelClientOptions,
} from "./anthropic-model-client.js";
export * from "./scripted-model-client.js";
export { createModelClient, type CreateModelClientOptions } from "./create-model-client.js";
export { apiKeysFromEnv, describeKey, type ApiKey } from "./api-keys.js";
export { RotatingModelClient, type RotatingModelClientOptions } from "./rotating-model-client.js";
export { fileKeyStateStore, memoryKeyStateStore, type KeyStateStore } from "./key-state-file.js";
export {
  CostMeter,
  callCostUsd,
  formatCost,
  pricesAsOf,
  type ModelPrice,
  type RunCost,
} from "./pricing.js";
