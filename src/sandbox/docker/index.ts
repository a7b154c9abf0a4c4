export { DockerEngine, type DockerEngineInfo, type DockerEngineOptions } from "./engine.js";
export {
  describeEngineEndpoint,
  resolveEngineEndpoint,
  type EngineEndpoint,
  type EngineSource,
  type EngineTransport,
} from "./client/engine-endpoint.js";
export { remoteEngineRefusal } from "./engine-filesystem.js";
export {
  SandboxImage,
  baseImageFromEnv,
  localBaseImage,
  officialBaseImage,
  sandboxImageRepository,
  type ImageBuildEvent,
  type ImageBuildOptions,
  type SandboxImageOptions,
  type SandboxImageStatus,
} from "./sandbox-image.js";
export { describeImageBuildEvent } from "./image-build-progress.js";
export {
  ProjectImages,
  parseDevcontainer,
  projectImageRepositoryPrefix,
  type Devcontainer,
  type ResolvedProjectImage,
} from "./project-image/index.js";
export { dockerFix } from "./docker-errors.js";
export { DockerSandbox, type DockerSandboxOptions } from "./docker-sandbox.js";
export type { DockerSandboxFiles } from "./files/container-files.js";
export type { CopyTreeOutOptions, CopyTreeOutResult } from "./files/tree-transfer.js";
export {
  DockerSandboxManager,
  type AcquireOptions,
  type AcquirePhase,
  type AcquireProgress,
  type DockerSandboxLease,
  type DockerSandboxManagerOptions,
  type ManagedContainer,
} from "./manager.js";
export { ForkTargetExistsError } from "./fork-workspace.js";
export { workspaceVolumeNames, type WorkspaceVolumes } from "./workspace-volumes.js";
export {
  UnappliedChangesCheck,
  reviewCommand,
  type CheckedCopy,
  describeUnapplied,
  type CopyWork,
  type UnappliedChanges,
} from "./unapplied-changes.js";
export { SandboxRecords, recordsDirectory, type SandboxRecord } from "./records.js";
export {
  pruneSupportVolumes,
  unusedSupportVolumes,
  type UnusedSupportVolume,
} from "./support-volume-sweep.js";
export {
  SandboxInventory,
  orphanGraceMs,
  UnappliedChangesError,
  describeWork,
  type Freshness,
  type KeptForChanges,
  type OrphanWorkspace,
  type SandboxRemoveOptions,
  type InventoryListOptions,
  type PruneOptions,
  type PruneReport,
  type RemovedSandbox,
  type SandboxInventoryOptions,
  type SandboxSummary,
} from "./inventory.js";
export {
  EgressProxies,
  anthropicApiUrl,
  createModelGateway,
  type ModelGateway,
  type ModelGatewayCall,
  type ModelGatewayOptions,
  detectTlsInspection,
  parseEgressLine,
  squidConfig,
  upstreamProxyFromEnv,
  type EgressDecision,
  type EgressProxySummary,
  type TlsInspection,
  type UpstreamProxy,
} from "./egress/index.js";
export {
  startInteractiveExec,
  type InteractiveExec,
  type InteractiveExecRequest,
  type TerminalSize,
} from "./interactive-exec.js";
export { AgentImage, agentImageNames, type AgentImageName } from "./agent-image.js";
export {
  stopIdleSandboxes,
  stopSandbox,
  type IdleStopOptions,
  type IdleStopReport,
  type SandboxHolders,
} from "./idle-stop.js";
export { readSandboxUsage, type SandboxUsage } from "./sandbox-usage.js";
export { commandsRunning } from "./container-activity.js";
export { gvisorBoundaryNote, gvisorPlatform, isGvisorRuntime } from "./gvisor.js";
export { probeRuntime } from "./runtime-probe.js";
export {
  WorkspaceInspectors,
  dockerWorkspaceChanges,
  inspectorLabels,
  type InspectedWorkspace,
} from "./inspector/index.js";
export { strayHomes, type StrayHome } from "./stray-containers.js";
