import { PassThrough, type Duplex, type Readable } from "node:stream";

import type Docker from "dockerode";

import { SandboxError, sleep } from "../../../common/index.js";
import { dockerStatusOf, startError, toSandboxError } from "../docker-errors.js";
import type {
  ContainerClient,
  ContainerDetails,
  ContainerFilter,
  ContainerStats,
  ContainerStatus,
  ContainerSummary,
  CreateContainerRequest,
  ExecStartRequest,
  StartedExec,
} from "./container-client.js";

/** How often a container being removed by someone else is looked at again, and how long. */
const removalPollMs = 250;
const removalPolls = 40;

/** `ContainerClient` over dockerode: Docker's statuses are mapped here and nowhere else. */
export class DockerContainerClient implements ContainerClient {
  constructor(private readonly docker: Docker) {}

  async inspect(nameOrId: string): Promise<ContainerDetails | undefined> {
    try {
      return detailsOf(await this.docker.getContainer(nameOrId).inspect());
    } catch (error) {
      if (dockerStatusOf(error) === 404) return undefined;
      throw toSandboxError(error, `inspect the container ${nameOrId}`);
    }
  }

  async writableLayerBytes(nameOrId: string): Promise<number> {
    try {
      const info = await this.docker
        .getContainer(nameOrId)
        // The API takes size=true; dockerode passes it through but its types do not list it.
        .inspect({ size: true } as Docker.ContainerInspectOptions);
      return (info as { SizeRw?: number }).SizeRw ?? 0;
    } catch (error) {
      if (dockerStatusOf(error) === 404) return 0;
      throw toSandboxError(error, `measure the container ${nameOrId}`);
    }
  }

  async list(filter: ContainerFilter): Promise<ContainerSummary[]> {
    try {
      const found = await this.docker.listContainers({
        all: !filter.runningOnly,
        filters: {
          label: filter.labels,
          ...(filter.runningOnly ? { status: ["running"] } : {}),
        },
      });
      return found.map(summaryOf);
    } catch (error) {
      throw toSandboxError(error, "list containers");
    }
  }

  async create(request: CreateContainerRequest): Promise<string | undefined> {
    try {
      return (await this.docker.createContainer(request)).id;
    } catch (error) {
      if (dockerStatusOf(error) === 409) return undefined;
      throw startError(
        error,
        request.name
          ? `create the sandbox container ${request.name}`
          : `create a container of ${request.Image}`,
      );
    }
  }

  async start(nameOrId: string, name = nameOrId): Promise<void> {
    try {
      await this.docker.getContainer(nameOrId).start();
    } catch (error) {
      // 304: already started, by us or another process.
      if (dockerStatusOf(error) === 304) return;
      throw startError(error, `start the sandbox container ${name}`);
    }
  }

  async stop(nameOrId: string, options: { graceSeconds: number }): Promise<boolean> {
    try {
      await this.docker.getContainer(nameOrId).stop({ t: options.graceSeconds });
      return true;
    } catch (error) {
      // 304: already stopped; 404: removed meanwhile. Either way there was nothing to stop.
      const status = dockerStatusOf(error);
      if (status === 304 || status === 404) return false;
      throw toSandboxError(error, `stop the container ${nameOrId}`);
    }
  }

  async kill(nameOrId: string): Promise<void> {
    try {
      await this.docker.getContainer(nameOrId).kill();
    } catch (error) {
      const status = dockerStatusOf(error);
      if (status === 404 || status === 409 || status === 304) return;
      throw toSandboxError(error, `stop the container ${nameOrId}`);
    }
  }

  async pause(nameOrId: string): Promise<void> {
    try {
      await this.docker.getContainer(nameOrId).pause();
    } catch (error) {
      throw toSandboxError(error, `pause ${nameOrId}`);
    }
  }

  async unpause(nameOrId: string): Promise<void> {
    try {
      await this.docker.getContainer(nameOrId).unpause();
    } catch (error) {
      throw toSandboxError(error, `unpause ${nameOrId}`);
    }
  }

  async remove(nameOrId: string, name = nameOrId): Promise<void> {
    try {
      await this.docker.getContainer(nameOrId).remove({ force: true, v: true });
      return;
    } catch (error) {
      const status = dockerStatusOf(error);
      if (status === 404) return;
      // 409: a removal is already in progress; wait for it below.
      if (status !== 409) throw toSandboxError(error, `remove the container ${name}`);
    }
    for (let poll = 0; poll < removalPolls; poll += 1) {
      await sleep(removalPollMs);
      if (!(await this.inspect(nameOrId))) return;
    }
    throw new SandboxError(`the container ${name} is still being removed`, {
      fix: `retry, or remove it with \`docker rm -f ${name}\``,
    });
  }

  async rename(nameOrId: string, newName: string): Promise<boolean> {
    try {
      await this.docker.getContainer(nameOrId).rename({ name: newName });
      return true;
    } catch (error) {
      if (dockerStatusOf(error) === 409) return false;
      throw toSandboxError(error, `rename the container ${nameOrId} to ${newName}`);
    }
  }

  async wait(nameOrId: string): Promise<number> {
    try {
      const result = (await this.docker.getContainer(nameOrId).wait()) as { StatusCode: number };
      return result.StatusCode;
    } catch (error) {
      throw toSandboxError(error, `wait for the container ${nameOrId}`);
    }
  }

  async processes(nameOrId: string): Promise<string[]> {
    try {
      const top = (await this.docker.getContainer(nameOrId).top()) as {
        Titles?: string[];
        Processes?: string[][];
      };
      const command = (top.Titles ?? []).findIndex(
        (title) => title === "CMD" || title === "COMMAND",
      );
      return (top.Processes ?? []).map((row) => row[command] ?? "");
    } catch (error) {
      throw toSandboxError(error, `list the processes of ${nameOrId}`);
    }
  }

  async stats(nameOrId: string): Promise<ContainerStats | undefined> {
    try {
      const state = (await this.docker.getContainer(nameOrId).inspect()).State;
      if (!state.Running || state.Paused) return undefined;
      // Not one-shot: the engine takes two samples, so the CPU share is over the last second.
      const raw = (await this.docker.getContainer(nameOrId).stats({ stream: false })) as RawStats;
      return statsFrom(raw);
    } catch (error) {
      // Gone or stopped meanwhile: nothing runs, so nothing is used.
      const status = dockerStatusOf(error);
      if (status === 404 || status === 409) return undefined;
      throw toSandboxError(error, `read the resource use of ${nameOrId}`);
    }
  }

  async logs(nameOrId: string, options: { stdout: boolean; stderr: boolean }): Promise<Buffer> {
    try {
      const logs: unknown = await this.docker
        .getContainer(nameOrId)
        .logs({ ...options, follow: false });
      return Buffer.isBuffer(logs) ? logs : Buffer.from(String(logs));
    } catch (error) {
      throw toSandboxError(error, `read the log of ${nameOrId}`);
    }
  }

  async followStdout(nameOrId: string, options: { sinceSeconds: number }): Promise<Readable> {
    let raw: NodeJS.ReadableStream;
    try {
      raw = await this.docker.getContainer(nameOrId).logs({
        follow: true,
        stdout: true,
        stderr: false,
        timestamps: true,
        since: options.sinceSeconds,
      });
    } catch (error) {
      throw toSandboxError(error, `follow the log of ${nameOrId}`);
    }
    const stdout = new PassThrough();
    this.docker.modem.demuxStream(raw, stdout, new PassThrough());
    raw.on("end", () => stdout.end());
    // Destroying what the caller holds closes the engine's connection too.
    stdout.on("close", () => (raw as Partial<Readable>).destroy?.());
    return stdout;
  }

  async exec(nameOrId: string, request: ExecStartRequest): Promise<StartedExec> {
    // Docker runs an exec without a user as the container's own, which in a sandbox is its
    // init's (DockerSettings.initUser): a command there could ptrace init.
    if (request.user.trim() === "") {
      throw new SandboxError(`a command in ${nameOrId} was started without naming its user`, {
        fix: "name the sandbox user (sandbox.docker.user) on every exec",
      });
    }
    const tty = request.tty ?? false;
    let exec: Docker.Exec;
    let stream: Duplex;
    try {
      exec = await this.docker.getContainer(nameOrId).exec({
        Cmd: request.cmd,
        User: request.user,
        WorkingDir: request.workingDir ?? "/",
        Env: request.env ?? [],
        AttachStdin: request.attachStdin,
        AttachStdout: true,
        AttachStderr: true,
        Tty: tty,
      });
      stream = await exec.start({ hijack: true, stdin: request.attachStdin, Tty: tty });
    } catch (error) {
      throw toSandboxError(error, `start a command in ${nameOrId}`);
    }
    return {
      stream,
      status: async () => {
        try {
          const info = await exec.inspect();
          return { running: info.Running, exitCode: info.ExitCode };
        } catch (error) {
          throw toSandboxError(error, `read a command's exit status in ${nameOrId}`);
        }
      },
      resize: async ({ rows, columns }) => {
        // Refused once the command has ended; a size no longer matters then.
        await exec.resize({ h: rows, w: columns }).catch(() => undefined);
      },
    };
  }

  async putArchive(nameOrId: string, directory: string, archive: Readable): Promise<void> {
    try {
      // The engine answers once the whole archive is extracted (an empty body).
      await this.docker.getContainer(nameOrId).putArchive(archive, { path: directory });
    } catch (error) {
      throw toSandboxError(error, `copy files into ${directory} of ${nameOrId}`);
    }
  }

  async getArchive(nameOrId: string, source: string): Promise<Readable> {
    try {
      return (await this.docker.getContainer(nameOrId).getArchive({ path: source })) as Readable;
    } catch (error) {
      throw toSandboxError(error, `copy ${source} out of ${nameOrId}`);
    }
  }

  async connect(network: string, nameOrId: string, aliases: string[]): Promise<void> {
    try {
      await this.docker
        .getNetwork(network)
        .connect({ Container: nameOrId, EndpointConfig: { Aliases: aliases } });
    } catch (error) {
      throw toSandboxError(error, `connect ${nameOrId} to the network ${network}`);
    }
  }
}

function detailsOf(info: Docker.ContainerInspectInfo): ContainerDetails {
  const state = info.State;
  return {
    id: info.Id,
    name: info.Name.replace(/^\//, ""),
    image: info.Config.Image,
    imageId: info.Image,
    labels: info.Config.Labels ?? {},
    createdAt: info.Created,
    addresses: Object.fromEntries(
      Object.entries(info.NetworkSettings.Networks ?? {})
        .filter(([, network]) => network.IPAddress)
        .map(([name, network]) => [name, network.IPAddress]),
    ),
    state: {
      status: state.Status as ContainerStatus,
      running: state.Running,
      paused: state.Paused,
      restarting: state.Restarting,
      oomKilled: state.OOMKilled,
      dead: state.Dead,
      exitCode: state.ExitCode,
      error: state.Error,
    },
  };
}

function summaryOf(info: Docker.ContainerInfo): ContainerSummary {
  return {
    id: info.Id,
    name: (info.Names[0] ?? info.Id).replace(/^\//, ""),
    image: info.Image,
    imageId: info.ImageID,
    labels: info.Labels,
    status: info.State as ContainerStatus,
    createdAtMs: info.Created * 1000,
    mounts: (info.Mounts ?? []).map((mount) => ({
      type: mount.Type,
      ...(mount.Name ? { name: mount.Name } : {}),
      source: mount.Source,
    })),
  };
}

/** The part of the engine's stats answer cordon reads (cgroups v1 and v2 alike). */
interface RawStats {
  cpu_stats?: {
    cpu_usage?: { total_usage?: number; percpu_usage?: number[] };
    system_cpu_usage?: number;
    online_cpus?: number;
  };
  precpu_stats?: { cpu_usage?: { total_usage?: number }; system_cpu_usage?: number };
  memory_stats?: { usage?: number; limit?: number; stats?: Record<string, number> };
}

/** The CPU share and memory `docker stats` shows, from one stats answer. */
export function statsFrom(raw: RawStats): ContainerStats {
  const cpu = raw.cpu_stats ?? {};
  const before = raw.precpu_stats ?? {};
  const used = (cpu.cpu_usage?.total_usage ?? 0) - (before.cpu_usage?.total_usage ?? 0);
  const system = (cpu.system_cpu_usage ?? 0) - (before.system_cpu_usage ?? 0);
  const cores = cpu.online_cpus || cpu.cpu_usage?.percpu_usage?.length || 1;
  const memory = raw.memory_stats ?? {};
  // The page cache is reclaimable: `docker stats` leaves it out (v1 names it cache, v2 inactive_file).
  const cache = memory.stats?.["total_inactive_file"] ?? memory.stats?.["inactive_file"] ?? 0;
  return {
    // No earlier sample (a one-shot answer): the share since the container started means nothing now.
    cpuPercent:
      before.system_cpu_usage && used > 0 && system > 0 ? (used / system) * cores * 100 : 0,
    memoryBytes: Math.max(0, (memory.usage ?? 0) - cache),
    memoryLimitBytes: memory.limit ?? 0,
  };
}
