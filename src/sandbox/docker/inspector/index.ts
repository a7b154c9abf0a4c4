export {
  dockerWorkspaceChanges,
  type DockerWorkspaceChanges,
  type DockerWorkspaceChangesOptions,
} from "./docker-workspace-changes.js";
export {
  WorkspaceInspectors,
  inspectorContainer,
  inspectorLabels,
  type InspectedWorkspace,
  type InspectionMode,
  type InspectionRequest,
  type InspectorAccess,
  type StartInspectorOptions,
  type InspectorContainerOptions,
  type Inspector,
  type WorkspaceInspectorsOptions,
} from "./workspace-inspector.js";
export {
  dockerWorkspaceCheckpoints,
  parseCopyState,
  type DockerWorkspaceCheckpoints,
  type DockerWorkspaceCheckpointsOptions,
} from "./docker-workspace-checkpoints.js";
