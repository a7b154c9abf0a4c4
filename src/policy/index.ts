/**
 * The policy core (DESIGN.md §2–§4): pure functions from config + agent + session to the plan a
 * run is made of, every decision with its provenance.
 */
export { planRun, type PlanRunInput, type RunPlan } from "./plan-run.js";
export { explainPlan, redactPlanSecrets, redactedValue } from "./explain.js";
export { describeRuntime, type PlannedRuntime } from "./agent-runtime.js";
export {
  builtinLimits,
  planLimits,
  type PlannedLimits,
  type RunLimitsRequest,
} from "./run-limits.js";
export {
  builtinToolCatalog,
  builtinToolNames,
  extendToolCatalog,
  resolveToolName,
  type ToolCatalog,
  type ToolCatalogExtension,
} from "./tool-catalog.js";
export {
  evaluateToolPolicy,
  type ToolDecision,
  type ToolEntries,
  type ToolLayer,
  type ToolPolicyInput,
  type ToolPolicyLayer,
  type ToolPolicyResult,
} from "./tool-policy.js";
export { mainSessionKey, normalizeSessionKey, maxSessionKeyLength } from "./session-key.js";
export {
  agentOfSessionKey,
  childSandboxRefusal,
  isSubagentSessionKey,
  planSubagents,
  spawnRefusal,
  subagentSessionKey,
  visibilityRefusal,
  type SessionRequester,
  type SessionTarget,
  type SubagentPlan,
  type SubagentTarget,
} from "./subagent-policy.js";
export { bootstrapFilesFor, minimalPromptFiles } from "./bootstrap-files.js";
export {
  containerNameOf,
  scopeKeyOf,
  workspaceIdOf,
  maxContainerNameLength,
} from "./container-name.js";
export { canonicalJson, hashOf } from "../common/index.js";
export { parseByteSize, formatByteSize } from "../config/index.js";
export { credentialLikeName } from "./sandbox-env.js";
export { protectedPaths, type ProtectedPath } from "./path-guard.js";
export { resolveAgent, implicitAgentId, type ResolvedAgent } from "./resolve-agent.js";
export { agentMountPoint, initUserFor } from "./docker-settings.js";
export { SandboxSettingsRefusedError } from "./policy-errors.js";
export { hostCaBundleCandidates } from "./egress.js";
