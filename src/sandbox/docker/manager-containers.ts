import type Docker from "dockerode";

import { SandboxError, SandboxStartError, sleep } from "../../common/index.js";
import { dockerMessageOf, dockerStatusOf, toSandboxError } from "./docker-errors.js";
import type { DockerEngine } from "./engine.js";
import { executorContainerPath } from "./resident/executor-binary.js";

/** How often a container being removed by someone else is looked at again, and how long. */
const removalPollMs = 250;
const removalPolls = 40;

/**
 * The container operations the manager and the inventory share, with Docker's statuses mapped
 * once: 404 on inspect is "absent", 409 on create is "someone else made it", 304 on start and
 * 404 on remove count as done, and a container already being removed is waited for.
 */
export class SandboxContainers {
  constructor(private readonly engine: DockerEngine) {}

  /** undefined when no container has that name or id. */
  async inspect(nameOrId: string): Promise<Docker.ContainerInspectInfo | undefined> {
    try {
      return await this.engine.client.getContainer(nameOrId).inspect();
    } catch (error) {
      if (dockerStatusOf(error) === 404) return undefined;
      throw toSandboxError(error, `inspect the container ${nameOrId}`);
    }
  }

  /** The new container, or undefined when the name is taken (409). */
  async create(options: Docker.ContainerCreateOptions): Promise<Docker.Container | undefined> {
    try {
      return await this.engine.client.createContainer(options);
    } catch (error) {
      if (dockerStatusOf(error) === 409) return undefined;
      throw startError(error, `create the sandbox container ${options.name ?? ""}`);
    }
  }

  async start(containerId: string, name: string): Promise<void> {
    try {
      await this.engine.client.getContainer(containerId).start();
    } catch (error) {
      // 304: already started, by us or another process.
      if (dockerStatusOf(error) === 304) return;
      throw startError(error, `start the sandbox container ${name}`);
    }
  }

  /** Freezes every process in the container (the cgroup freezer); `unpause` thaws them. */
  async pause(containerId: string, name: string): Promise<void> {
    try {
      await this.engine.client.getContainer(containerId).pause();
    } catch (error) {
      throw toSandboxError(error, `pause ${name}`);
    }
  }

  async unpause(containerId: string, name: string): Promise<void> {
    try {
      await this.engine.client.getContainer(containerId).unpause();
    } catch (error) {
      throw toSandboxError(error, `unpause ${name}`);
    }
  }

  /**
   * Bytes in a container's writable root layer (Docker's SizeRw, which the engine measures on
   * the host); 0 for a container that does not exist (yet).
   */
  async writableLayerBytes(nameOrId: string): Promise<number> {
    try {
      const info = await this.engine.client
        .getContainer(nameOrId)
        // The API takes size=true; dockerode passes it through but its types do not list it.
        .inspect({ size: true } as Docker.ContainerInspectOptions);
      return (info as { SizeRw?: number }).SizeRw ?? 0;
    } catch (error) {
      if (dockerStatusOf(error) === 404) return 0;
      throw toSandboxError(error, `measure the container ${nameOrId}`);
    }
  }

  /** Kills every process of a container (it stops); one not running or gone counts as done. */
  async kill(nameOrId: string): Promise<void> {
    try {
      await this.engine.client.getContainer(nameOrId).kill();
    } catch (error) {
      const status = dockerStatusOf(error);
      if (status === 404 || status === 409 || status === 304) return;
      throw toSandboxError(error, `stop the container ${nameOrId}`);
    }
  }

  /** Removes a container in any state; gone already counts as removed. */
  async remove(containerId: string, name: string): Promise<void> {
    const container = this.engine.client.getContainer(containerId);
    try {
      await container.remove({ force: true, v: true });
      return;
    } catch (error) {
      const status = dockerStatusOf(error);
      if (status === 404) return;
      // 409: a removal is already in progress; wait for it below.
      if (status !== 409) throw toSandboxError(error, `remove the container ${name}`);
    }
    for (let poll = 0; poll < removalPolls; poll += 1) {
      await sleep(removalPollMs);
      if (!(await this.inspect(containerId))) return;
    }
    throw new SandboxError(`the container ${name} is still being removed`, {
      fix: `retry, or remove it with \`docker rm -f ${name}\``,
    });
  }

  /**
   * Whether commands run in the container (from any process): an idle sandbox runs only its init,
   * `sleep infinity` and cordon's resident executor (which lives as long as the container). When
   * Docker cannot tell, it counts as busy: never destroy on doubt.
   */
  async isBusy(containerId: string): Promise<boolean> {
    try {
      const top = (await this.engine.client.getContainer(containerId).top()) as {
        Titles?: string[];
        Processes?: string[][];
      };
      const command = (top.Titles ?? []).findIndex(
        (title) => title === "CMD" || title === "COMMAND",
      );
      const working = (top.Processes ?? []).filter(
        (row) => !(row[command] ?? "").startsWith(executorContainerPath),
      );
      return working.length > 2;
    } catch {
      return true;
    }
  }
}

/** A create/start failure as a `SandboxStartError` with the remedy, or Docker being unreachable. */
export function startError(error: unknown, action: string): SandboxError {
  const mapped = toSandboxError(error, action);
  if (mapped.code === "docker_unavailable") return mapped;
  const detail = dockerMessageOf(error);
  let fix =
    "check the sandbox.docker settings (`cordon sandbox explain` shows them); `cordon doctor` checks the engine";
  if (/runtime/i.test(detail)) {
    fix = "check sandbox.docker.runtime: `docker info` lists the runtimes this engine has";
  } else if (/bind source path|mount/i.test(detail)) {
    fix = "check the sandbox mounts: every source must exist on the Docker host";
  }
  return new SandboxStartError(`cannot ${action}: ${detail}`, { fix, cause: error });
}
