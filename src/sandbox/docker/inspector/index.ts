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
  type Inspector,
  type WorkspaceInspectorsOptions,
} from "./workspace-inspector.js";
