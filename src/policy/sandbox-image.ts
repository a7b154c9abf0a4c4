import type { DockerConfig } from "../config/index.js";
import type { SandboxImageSpec } from "../sandbox/index.js";
import type { Planned } from "./planned.js";
import { planProjectImage } from "./project-image.js";

export interface SandboxImageInput {
  docker: DockerConfig;
  /** Config key of a docker field, for messages. */
  key: (field: keyof DockerConfig) => string;
  /** The agent workspace (absolute, links resolved): a project image is built from inside it. */
  workspace: string;
  /** The run's agent runtime when it brings an image of its own (Claude Code). */
  runtime?: "claude-code" | undefined;
}

/**
 * The one decision of which image a sandbox runs: `sandbox.docker.image`, else the project's
 * Dockerfile or devcontainer.json, else the agent runtime's image, else cordon's built-in image
 * (SandboxImageSpec). Naming both an image and a project file is refused.
 */
export function planSandboxImage(input: SandboxImageInput): Planned<SandboxImageSpec> {
  const { docker, key } = input;
  const project = planProjectImage(input);
  const chosen = (image: SandboxImageSpec): Planned<SandboxImageSpec> => ({
    ...project,
    value: image,
  });
  if (docker.image !== undefined) {
    return chosen({ source: "config", reference: docker.image, configKey: key("image") });
  }
  if (project.value !== undefined) return chosen({ source: "project", project: project.value });
  if (input.runtime !== undefined) return chosen({ source: "runtime", runtime: input.runtime });
  return chosen({ source: "builtin" });
}
