export type {
  BindMount,
  ContainerClient,
  ContainerDetails,
  ContainerFilter,
  ContainerHostConfig,
  ContainerState,
  ContainerStats,
  ContainerStatus,
  ContainerSummary,
  CreateContainerRequest,
  ExecStartRequest,
  ExecStatus,
  StartedExec,
} from "./container-client.js";
export type {
  EngineClients,
  EngineDetails,
  ImageBuildRequest,
  ImageBuildStreamEvent,
  ImageClient,
  ImageDetails,
  NetworkClient,
  NetworkDetails,
  SystemClient,
} from "./engine-clients.js";
export { connectDocker } from "./docker-engine-clients.js";
