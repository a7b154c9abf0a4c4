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
export { DockerSandbox, type DockerSandboxOptions } from "./docker-sandbox.js";
export type { CopyTreeOutOptions, CopyTreeOutResult } from "./files/tree-transfer.js";
