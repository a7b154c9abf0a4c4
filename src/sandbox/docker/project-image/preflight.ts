import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";

import { ImageError, packageRoot, throwIfAborted } from "../../../common/index.js";
import { toSandboxError } from "../docker-errors.js";
import type { DockerEngine } from "../engine.js";
import { sandboxImageRepository } from "../sandbox-image.js";

export interface PreflightOptions {
  engine: DockerEngine;
  reference: string;
  imageId: string;
  /** "uid:gid" the sandbox runs as; the preflight runs as it too. */
  user: string;
  /** A user name to look up in the image (a devcontainer's remoteUser), or undefined. */
  userName?: string | undefined;
  /** Where passed preflights are remembered, one empty file per image id and user. */
  markDirectory: string;
  /** Where the image came from, for the error: `.cordon/Dockerfile (sandbox.docker.dockerfile)`. */
  source: string;
  signal?: AbortSignal | undefined;
}

export interface PreflightResult {
  /** `uid:gid` of `userName` in the image, "unknown" when it has none; undefined when not asked. */
  userIds?: string | undefined;
}

/** The Debian package that brings each program the tools need, for the fix. */
const packageOf: Record<string, string> = {
  bash: "bash",
  git: "git",
  tar: "tar",
  find: "findutils",
  xargs: "findutils",
  grep: "grep",
  sed: "sed",
};

/**
 * Checks that a project image can be a sandbox before any container of it is: the programs the
 * sandbox's tools run (bash, git, tar and coreutils; images/project-image-preflight.sh) are there
 * for the sandbox user. Runs once per image id and user, in a container with no network, no
 * capabilities and a read-only root, removed afterwards. Whether the sandbox user can write
 * `/workspace` is asked of every sandbox container as it starts (workspace-probe.ts), since it
 * is the mounted workspace, not the image, that decides it.
 */
export async function preflightProjectImage(options: PreflightOptions): Promise<PreflightResult> {
  const mark = path.join(
    options.markDirectory,
    `${options.imageId.replace(/^sha256:/, "").slice(0, 24)}-${options.user.replace(/[^0-9]+/g, "-")}-${options.userName ?? ""}`,
  );
  const remembered = await readFile(mark, "utf8").catch(() => undefined);
  if (remembered !== undefined) return remembered === "" ? {} : { userIds: remembered };

  const output = await runPreflight(options);
  const missing: string[] = [];
  let userIds: string | undefined;
  for (const line of output.split(/\r?\n/)) {
    const missingProgram = /^missing: (\S+)$/.exec(line);
    if (missingProgram) missing.push(missingProgram[1]!);
    if (/^broken: /.test(line)) missing.push(line.slice("broken: ".length));
    const user = /^user: (\S+)$/.exec(line);
    if (user) userIds = user[1];
  }
  if (missing.length > 0) throw preflightFailure(options, missing);
  await mkdir(options.markDirectory, { recursive: true });
  await writeFile(mark, userIds ?? "");
  return userIds === undefined ? {} : { userIds };
}

async function runPreflight(options: PreflightOptions): Promise<string> {
  const containers = options.engine.containers;
  const script = await readFile(path.join(packageRoot(), "images", "project-image-preflight.sh"));
  throwIfAborted(options.signal, "project image preflight");
  let container: string | undefined;
  try {
    container = await containers.create({
      Image: options.imageId,
      User: options.user,
      Entrypoint: ["/bin/sh", "-c", script.toString("utf8"), "preflight", options.userName ?? ""],
      Cmd: [],
      WorkingDir: "/",
      Tty: true,
      NetworkDisabled: true,
      Labels: { "cordon.preflight": options.reference },
      HostConfig: {
        NetworkMode: "none",
        ReadonlyRootfs: true,
        CapDrop: ["ALL"],
        SecurityOpt: ["no-new-privileges:true"],
        Tmpfs: { "/tmp": "rw,nosuid,nodev,size=16m" },
        Memory: 256 * 1024 * 1024,
        PidsLimit: 64,
      },
    });
  } catch (error) {
    throw toSandboxError(error, `create a preflight container of ${options.reference}`);
  }
  if (container === undefined) {
    throw new ImageError(`a preflight container of ${options.reference} could not be created`, {
      fix: "run again",
    });
  }
  try {
    try {
      await containers.start(container);
    } catch (error) {
      // The engine cannot even start /bin/sh: the image has no shell at all.
      if (/\/bin\/sh|executable file not found|no such file/i.test(String(error))) {
        throw preflightFailure(options, ["sh", "bash", "git"]);
      }
      throw toSandboxError(error, `start a preflight container of ${options.reference}`);
    }
    await containers.wait(container);
    // A TTY: the log is the output as it was written, no frames.
    return (await containers.logs(container, { stdout: true, stderr: true })).toString("utf8");
  } finally {
    await containers.remove(container).catch(() => undefined);
  }
}

function preflightFailure(options: PreflightOptions, missing: string[]): ImageError {
  const packages = [...new Set(missing.map((program) => packageOf[program] ?? "coreutils"))];
  return new ImageError(
    `the project image ${options.reference}, built from ${options.source}, cannot run a sandbox: it has no ${missing.join(", ")} for uid ${options.user}`,
    {
      fix: `start the Dockerfile FROM ${sandboxImageRepository}:latest (cordon's own image has everything), or install them in the image (Debian: \`RUN apt-get install -y --no-install-recommends ${packages.join(" ")}\`); see cordon help images`,
    },
  );
}
