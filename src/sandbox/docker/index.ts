export { DockerEngine, type DockerEngineInfo, type DockerEngineOptions } from "./engine.js";
export {
  SandboxImage,
  localBaseImage,
  officialBaseImage,
  sandboxImageRepository,
  type ImageBuildEvent,
  type ImageBuildOptions,
  type SandboxImageOptions,
  type SandboxImageStatus,
} from "./sandbox-image.js";
export { dockerFix } from "./docker-errors.js";
