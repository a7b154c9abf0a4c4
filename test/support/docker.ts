import { PassThrough } from "node:stream";

import Docker from "dockerode";

import {
  ensureExecutorVolume,
  residentExecutorBinary,
} from "../../src/sandbox/docker/resident/executor-binary.js";
import { SupportVolumes } from "../../src/sandbox/docker/support-volumes.js";
import { DockerEngine, SandboxImage } from "../../src/sandbox/index.js";

/** Label on every container a test creates, so leftovers can be found and removed. */
export const testLabel = { "cordon.test": "1" } as const;

/**
 * The tag of the current sandbox image. Integration tests need it built (scripts/setup.sh does
 * that, and `npm test` runs setup first); fail with that fix rather than skip.
 */
export async function requireSandboxImage(): Promise<string> {
  const status = await new SandboxImage(new DockerEngine()).status();
  if (!status.present) {
    throw new Error(`sandbox image ${status.tag} is not built; run \`bash scripts/setup.sh\``);
  }
  return status.tag;
}

export function dockerClient(): Docker {
  return new Docker();
}

/** Removes, whatever their state, the containers cordon made for the state directory `home`. */
export async function removeContainersOfHome(home: string): Promise<void> {
  const docker = dockerClient();
  for (const info of await docker.listContainers({ all: true })) {
    if ((info.Labels["cordon.home"] ?? "") !== home) continue;
    await docker
      .getContainer(info.Id)
      .remove({ force: true })
      .catch(() => undefined);
  }
}

export interface ExecOutput {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command in a container through the API (test-side helper, not cordon's exec), as `user`
 * or else the container's own: in a sandbox that is its init's (`initUser`), not the agent's.
 */
export async function execIn(
  container: Docker.Container,
  command: string[],
  options: { user?: string } = {},
): Promise<ExecOutput> {
  const modem = container.modem as {
    demuxStream(s: NodeJS.ReadableStream, o: PassThrough, e: PassThrough): void;
  };
  const exec = await container.exec({
    Cmd: command,
    ...(options.user ? { User: options.user } : {}),
    AttachStdout: true,
    AttachStderr: true,
  });
  const stream = await exec.start({ hijack: true, stdin: false });
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  const out = new PassThrough().on("data", (chunk: Buffer) => stdout.push(chunk));
  const err = new PassThrough().on("data", (chunk: Buffer) => stderr.push(chunk));
  await new Promise<void>((resolve, reject) => {
    modem.demuxStream(stream, out, err);
    stream.on("end", resolve);
    stream.on("error", reject);
  });
  const info = await exec.inspect();
  return {
    exitCode: info.ExitCode,
    stdout: Buffer.concat(stdout).toString("utf8"),
    stderr: Buffer.concat(stderr).toString("utf8"),
  };
}

/** Removes a container, whatever state it is in; a missing one counts as removed. */
export async function removeContainer(container: Docker.Container | undefined): Promise<void> {
  if (!container) return;
  await container.remove({ force: true, v: true }).catch((error: { statusCode?: number }) => {
    if (error.statusCode !== 404) throw error;
  });
}

/**
 * Removes what a failed `cordon fix-tests` left behind: the containers of each session key and of
 * its `-verify` session (fix-tests removes them itself when it gets the chance).
 */
export async function removeFixTestsContainers(sessionKeys: readonly string[]): Promise<void> {
  const docker = dockerClient();
  for (const key of sessionKeys.flatMap((k) => [k, `${k}-verify`])) {
    const left = await docker.listContainers({
      all: true,
      filters: { label: [`cordon.session=${key}`] },
    });
    for (const info of left) {
      await docker
        .getContainer(info.Id)
        .remove({ force: true })
        .catch(() => undefined);
    }
  }
}

/**
 * The local engine's volume holding the executor cordon built (what the manager mounts at
 * /.cordon), for a test that creates its container itself; undefined when none was built or
 * `binary` is undefined.
 */
export async function testExecutorVolume(
  image: string,
  options: { binary?: string | undefined; engine?: DockerEngine | undefined } = {},
): Promise<string | undefined> {
  const support = new SupportVolumes(options.engine ?? new DockerEngine());
  return ensureExecutorVolume(
    support,
    image,
    "binary" in options ? options.binary : residentExecutorBinary(),
  );
}
