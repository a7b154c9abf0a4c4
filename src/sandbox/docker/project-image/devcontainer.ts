import path from "node:path";

import JSON5 from "json5";
import { z } from "zod";

import { ImageError } from "../../../common/index.js";

/**
 * What cordon takes from a devcontainer.json (containers.dev/implementors/json_reference): the
 * image, or the Dockerfile with its context, arguments and target; the environment; the user
 * names. Everything else (features, lifecycle commands, ports, mounts, run arguments,
 * customizations) is ignored and listed in one note: a sandbox is not an editor's container.
 */
export interface Devcontainer {
  /** An image the sandbox runs as it is. */
  image?: string | undefined;
  /** A Dockerfile to build, absolute paths resolved against the devcontainer.json's directory. */
  build?:
    | {
        dockerfile: string;
        context: string;
        args: Record<string, string>;
        target?: string | undefined;
      }
    | undefined;
  /** containerEnv then remoteEnv, merged: both are what the sandbox's processes see. */
  env: Record<string, string>;
  /** `remoteUser`, else `containerUser`: the user the file wants tools to run as. */
  user?: { name: string; key: "remoteUser" | "containerUser" } | undefined;
  /** Top-level keys present and ignored, sorted. */
  ignored: string[];
  /** Environment values cordon could not take as written (`${localEnv:…}` and the like). */
  droppedEnv: string[];
}

const environment = z.record(z.string().regex(/^[^=\0]+$/), z.string().nullable());
const devcontainerSchema = z.looseObject({
  image: z.string().min(1).optional(),
  build: z
    .looseObject({
      dockerfile: z.string().min(1).optional(),
      context: z.string().min(1).optional(),
      args: z.record(z.string(), z.string()).optional(),
      target: z.string().min(1).optional(),
    })
    .optional(),
  // The spec's older spelling, still accepted by the reference implementation.
  dockerFile: z.string().min(1).optional(),
  context: z.string().min(1).optional(),
  containerEnv: environment.optional(),
  remoteEnv: environment.optional(),
  containerUser: z.string().min(1).optional(),
  remoteUser: z.string().min(1).optional(),
  dockerComposeFile: z.unknown().optional(),
});

/** Keys cordon reads; every other top-level key is reported as ignored. */
const usedKeys = new Set([
  "image",
  "build",
  "dockerFile",
  "context",
  "containerEnv",
  "remoteEnv",
  "containerUser",
  "remoteUser",
  // Only a display name.
  "name",
  "$schema",
]);

/**
 * Parses a devcontainer.json (JSON with comments and trailing commas: json5 reads that, and is
 * already how cordon reads its own config). `file` is its absolute path; `text` its content, read
 * by the caller without following links. Hostile data: parsed, schema-checked, never evaluated.
 */
export function parseDevcontainer(file: string, text: string): Devcontainer {
  let raw: unknown;
  try {
    raw = JSON5.parse(text);
  } catch (error) {
    throw new ImageError(`${file} is not valid JSON with comments: ${(error as Error).message}`, {
      fix: "fix the devcontainer.json (or remove sandbox.docker.devcontainer)",
    });
  }
  const parsed = devcontainerSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues
      .map((issue) => `${issue.path.join(".") || "(top level)"}: ${issue.message}`)
      .join("; ");
    throw new ImageError(`${file} does not describe a container cordon can use: ${issues}`, {
      fix: "fix the devcontainer.json (`cordon help images` lists the fields cordon reads)",
    });
  }
  const config = parsed.data;
  const directory = path.dirname(file);
  if (config.dockerComposeFile !== undefined) {
    throw new ImageError(
      `${file} uses dockerComposeFile; cordon builds one image, not a Compose project`,
      {
        fix: "point sandbox.docker.devcontainer at a devcontainer.json with image or build.dockerfile, or use sandbox.docker.dockerfile",
      },
    );
  }
  const dockerfile = config.build?.dockerfile ?? config.dockerFile;
  if ((dockerfile === undefined) === (config.image === undefined)) {
    throw new ImageError(
      `${file} must name exactly one of image and build.dockerfile (it names ${dockerfile === undefined ? "neither" : "both"})`,
      { fix: "set image or build.dockerfile in the devcontainer.json" },
    );
  }
  const droppedEnv: string[] = [];
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries({ ...config.containerEnv, ...config.remoteEnv })) {
    if (value === null) continue;
    // ${localEnv:…} would copy the host's environment into the sandbox, and the other
    // variables name places on the host or in an editor: only literal values are taken.
    if (/\$\{[^}]*\}/.test(value)) droppedEnv.push(name);
    else env[name] = value;
  }
  const userKey = config.remoteUser !== undefined ? "remoteUser" : "containerUser";
  const userName = config.remoteUser ?? config.containerUser;
  return {
    ...(config.image !== undefined ? { image: config.image } : {}),
    ...(dockerfile !== undefined
      ? {
          build: {
            dockerfile: path.resolve(directory, dockerfile),
            // The spec's default context is the devcontainer.json's own directory.
            context: path.resolve(directory, config.build?.context ?? config.context ?? "."),
            args: { ...config.build?.args },
            target: config.build?.target,
          },
        }
      : {}),
    env,
    ...(userName !== undefined ? { user: { name: userName, key: userKey } } : {}),
    ignored: Object.keys(config)
      .filter((key) => !usedKeys.has(key))
      .sort(),
    droppedEnv: droppedEnv.sort(),
  };
}
