export {
  ProjectImages,
  projectImageRepositoryPrefix,
  type ProjectImagesOptions,
  type ResolvedProjectImage,
} from "./project-image.js";
export { parseDevcontainer, type Devcontainer } from "./devcontainer.js";
export { dockerfileBaseImages } from "./dockerfile-bases.js";
