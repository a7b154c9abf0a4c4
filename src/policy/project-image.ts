import path from "node:path";

import type { ConfigIssue, DockerConfig } from "../config/index.js";
import type { ProjectImageSpec } from "../sandbox/index.js";
import { isWithin, normalizeAbsolute } from "./path-guard.js";
import { planned, type Planned } from "./planned.js";

export interface ProjectImageInput {
  docker: DockerConfig;
  /** Config key of a docker field, for messages. */
  key: (field: keyof DockerConfig) => string;
  /** The agent workspace (absolute, links resolved): the files named must lie inside it. */
  workspace: string;
}

/**
 * `sandbox.docker.dockerfile` / `sandbox.docker.devcontainer` resolved into what the builder reads:
 * absolute paths that lie inside the workspace as written (the builder then refuses links on the
 * way, docs/images.md). Undefined when neither key is set. Only a trusted config may set either
 * (config/loosening-keys.ts): building runs the repository's code on this machine.
 */
export function planProjectImage(input: ProjectImageInput): Planned<ProjectImageSpec | undefined> {
  const { docker, key, workspace } = input;
  const issues: ConfigIssue[] = [];
  const refused = () => planned(undefined, { issues });
  const named = (["dockerfile", "devcontainer"] as const).filter(
    (field) => docker[field] !== undefined,
  );
  if (named.length === 0) return planned(undefined);
  if (named.length > 1 || docker.image !== undefined) {
    const fields: (keyof DockerConfig)[] = docker.image === undefined ? named : ["image", ...named];
    issues.push({
      path: key(named[0]!),
      message: `set one of ${fields.map((field) => key(field)).join(" and ")}, not both: each names the image the sandbox runs`,
    });
    return refused();
  }
  const inside = (field: keyof DockerConfig, written: string): string | undefined => {
    if (path.posix.isAbsolute(written)) {
      issues.push({
        path: key(field),
        message: `"${written}" must be relative to the workspace (the image is built from the project's own files)`,
      });
      return undefined;
    }
    const resolved = normalizeAbsolute(path.posix.join(workspace, written));
    if (!isWithin(resolved, workspace)) {
      issues.push({
        path: key(field),
        message: `"${written}" leads outside the workspace ${workspace}`,
      });
      return undefined;
    }
    return resolved;
  };

  if (docker.devcontainer !== undefined) {
    const file = inside("devcontainer", docker.devcontainer);
    if (file === undefined) return refused();
    return planned(
      { source: "devcontainer", configKey: key("devcontainer"), file, workspace },
      {
        notes: [
          `image built from the devcontainer ${docker.devcontainer} (${key("devcontainer")}), tagged cordon-project-<slug>:<hash of its inputs>; rebuilt only when they change`,
        ],
      },
    );
  }
  const setting = docker.dockerfile!;
  const written = typeof setting === "string" ? { file: setting } : setting;
  const file = inside("dockerfile", written.file);
  if (file === undefined) return refused();
  const context =
    written.context === undefined
      ? path.posix.dirname(file)
      : inside("dockerfile", written.context);
  if (context === undefined) return refused();
  return planned(
    {
      source: "dockerfile",
      configKey: key("dockerfile"),
      file,
      workspace,
      context,
      args: { ...written.args },
    },
    {
      notes: [
        `image built from ${written.file} with the context ${path.posix.relative(workspace, context) || "."} (${key("dockerfile")}), tagged cordon-project-<slug>:<hash of its inputs>; rebuilt only when they change`,
      ],
    },
  );
}
