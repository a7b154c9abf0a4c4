import { Readable } from "node:stream";

import { SandboxError, SandboxStartError } from "../../../../common/index.js";
import type {
  ContainerStats,
  ContainerClient,
  ContainerDetails,
  ContainerFilter,
  ContainerState,
  ContainerSummary,
  CreateContainerRequest,
  ExecStartRequest,
  StartedExec,
} from "../container-client.js";

/** One container of the fake engine; tests set any field to script a state. */
export interface FakeContainer {
  id: string;
  name: string;
  image: string;
  imageId: string;
  labels: Record<string, string>;
  createdAt: string;
  state: ContainerState;
  /** The command lines `processes` answers while it runs (default: init and `sleep infinity`). */
  processes?: string[] | undefined;
  /** The state `start` leaves it in (default running): e.g. "created" while another start runs. */
  afterStart?: ContainerState | undefined;
  /** When set, `start` fails with this engine message (and the container stays as it is). */
  startFailure?: string | undefined;
  /** What it was created from, when `create` made it. */
  request?: CreateContainerRequest | undefined;
}

/** One recorded call: the method and its arguments. */
export interface FakeCall {
  method: keyof ContainerClient;
  args: unknown[];
}

/** An engine error as the real client gives it: a `SandboxError` whose cause has the status. */
export function engineError(status: number, message: string): SandboxError {
  return new SandboxError(`Docker failed (HTTP ${status}): ${message}`, {
    cause: Object.assign(new Error(message), { statusCode: status }),
  });
}

export function runningState(): ContainerState {
  return {
    status: "running",
    running: true,
    paused: false,
    restarting: false,
    oomKilled: false,
    dead: false,
    exitCode: 0,
    error: "",
  };
}

/** The state of a container whose main process ended with `exitCode`. */
export function exitedState(
  exitCode: number,
  options: { oomKilled?: boolean } = {},
): ContainerState {
  return {
    ...runningState(),
    status: "exited",
    running: false,
    exitCode,
    oomKilled: options.oomKilled ?? false,
  };
}

export function createdState(): ContainerState {
  return { ...runningState(), status: "created", running: false };
}

/**
 * A `ContainerClient` over an in-memory engine, for unit tests: it keeps containers by id and
 * unique name as Docker does, records every call, and lets a test script states (set a
 * container's `state`) and interleavings (`before`, which runs before a method does its work:
 * another process creating the same name between an inspect and a create). Exec and logs are not
 * played: a test that needs them needs a real engine.
 */
export class FakeContainerClient implements ContainerClient {
  readonly calls: FakeCall[] = [];
  /** By id. */
  readonly containers = new Map<string, FakeContainer>();
  /** Image reference → the id containers created from it run. */
  readonly imageIds = new Map<string, string>();
  /** Runs before the named method does its work, each time (a stand-in for another process). */
  readonly before: Partial<Record<keyof ContainerClient, (...args: unknown[]) => void>> = {};
  #nextId = 1;

  /** Adds a container as if something had created it; returns it for the test to change. */
  add(container: Partial<FakeContainer> & { name: string }): FakeContainer {
    const id = container.id ?? this.#newId();
    const added: FakeContainer = {
      id,
      image: "image:test",
      imageId: "sha256:0000000000000000",
      labels: {},
      createdAt: new Date(0).toISOString(),
      state: runningState(),
      ...container,
    };
    this.containers.set(id, added);
    return added;
  }

  /** The container with this name or id, if there is one. */
  find(nameOrId: string): FakeContainer | undefined {
    return (
      this.containers.get(nameOrId) ??
      [...this.containers.values()].find((container) => container.name === nameOrId)
    );
  }

  /** The methods called, in order (arguments left out). */
  methods(): string[] {
    return this.calls.map((call) => call.method);
  }

  #record(method: keyof ContainerClient, args: unknown[]): void {
    this.calls.push({ method, args });
    this.before[method]?.(...args);
  }

  #newId(): string {
    return `fake${String(this.#nextId++).padStart(60, "0")}`;
  }

  #existing(nameOrId: string): FakeContainer {
    const container = this.find(nameOrId);
    if (!container) throw engineError(404, `No such container: ${nameOrId}`);
    return container;
  }

  inspect(nameOrId: string): Promise<ContainerDetails | undefined> {
    this.#record("inspect", [nameOrId]);
    const container = this.find(nameOrId);
    return Promise.resolve(container && detailsOf(container));
  }

  writableLayerBytes(nameOrId: string): Promise<number> {
    this.#record("writableLayerBytes", [nameOrId]);
    return Promise.resolve(0);
  }

  list(filter: ContainerFilter): Promise<ContainerSummary[]> {
    this.#record("list", [filter]);
    const matches = (labels: Record<string, string>) =>
      filter.labels.every((entry) => {
        const [key, value] = entry.split(/=(.*)/s);
        return value === undefined ? key! in labels : labels[key!] === value;
      });
    return Promise.resolve(
      [...this.containers.values()]
        .filter((c) => matches(c.labels) && (!filter.runningOnly || c.state.running))
        .map((c) => ({
          id: c.id,
          name: c.name,
          image: c.image,
          imageId: c.imageId,
          labels: { ...c.labels },
          status: c.state.status,
          createdAtMs: Date.parse(c.createdAt),
          mounts: (c.request?.HostConfig?.Mounts ?? []).map((mount) =>
            mount.Type === "volume"
              ? {
                  type: "volume",
                  name: mount.Source,
                  source: `/var/lib/docker/volumes/${mount.Source}/_data`,
                }
              : { type: mount.Type, source: mount.Source },
          ),
        })),
    );
  }

  create(request: CreateContainerRequest): Promise<string | undefined> {
    this.#record("create", [request]);
    const name = request.name ?? this.#newId();
    if (this.find(name)) return Promise.resolve(undefined);
    const container = this.add({
      name,
      image: request.Image,
      imageId: this.imageIds.get(request.Image) ?? "sha256:0000000000000000",
      labels: { ...request.Labels },
      createdAt: new Date().toISOString(),
      state: createdState(),
      request,
    });
    return Promise.resolve(container.id);
  }

  start(nameOrId: string, name = nameOrId): Promise<void> {
    this.#record("start", [nameOrId]);
    const container = this.#existing(nameOrId);
    if (container.startFailure) {
      container.state = { ...createdState(), error: container.startFailure };
      return Promise.reject(
        new SandboxStartError(
          `cannot start the sandbox container ${name}: ${container.startFailure}`,
        ),
      );
    }
    if (!container.state.running) container.state = container.afterStart ?? runningState();
    return Promise.resolve();
  }

  stop(nameOrId: string, options: { graceSeconds: number }): Promise<boolean> {
    this.#record("stop", [nameOrId, options]);
    const container = this.find(nameOrId);
    if (!container?.state.running) return Promise.resolve(false);
    container.state = exitedState(143);
    return Promise.resolve(true);
  }

  kill(nameOrId: string): Promise<void> {
    this.#record("kill", [nameOrId]);
    const container = this.find(nameOrId);
    if (container?.state.running) container.state = exitedState(137);
    return Promise.resolve();
  }

  pause(nameOrId: string): Promise<void> {
    this.#record("pause", [nameOrId]);
    const container = this.#existing(nameOrId);
    container.state = { ...container.state, status: "paused", paused: true };
    return Promise.resolve();
  }

  unpause(nameOrId: string): Promise<void> {
    this.#record("unpause", [nameOrId]);
    const container = this.#existing(nameOrId);
    container.state = { ...container.state, status: "running", paused: false };
    return Promise.resolve();
  }

  remove(nameOrId: string): Promise<void> {
    this.#record("remove", [nameOrId]);
    const container = this.find(nameOrId);
    if (container) this.containers.delete(container.id);
    return Promise.resolve();
  }

  rename(nameOrId: string, newName: string): Promise<boolean> {
    this.#record("rename", [nameOrId, newName]);
    const container = this.#existing(nameOrId);
    if (this.find(newName)) return Promise.resolve(false);
    container.name = newName;
    return Promise.resolve(true);
  }

  wait(nameOrId: string): Promise<number> {
    this.#record("wait", [nameOrId]);
    return Promise.resolve(this.#existing(nameOrId).state.exitCode);
  }

  processes(nameOrId: string): Promise<string[]> {
    this.#record("processes", [nameOrId]);
    const container = this.#existing(nameOrId);
    if (!container.state.running) return Promise.reject(engineError(409, "not running"));
    return Promise.resolve(
      container.processes ?? ["/sbin/docker-init -- sleep infinity", "sleep infinity"],
    );
  }

  stats(nameOrId: string): Promise<ContainerStats | undefined> {
    this.#record("stats", [nameOrId]);
    const container = this.find(nameOrId);
    if (!container?.state.running) return Promise.resolve(undefined);
    return Promise.resolve({ cpuPercent: 0, memoryBytes: 0, memoryLimitBytes: 0 });
  }

  logs(nameOrId: string): Promise<Buffer> {
    this.#record("logs", [nameOrId]);
    return Promise.resolve(Buffer.alloc(0));
  }

  followStdout(nameOrId: string): Promise<Readable> {
    this.#record("followStdout", [nameOrId]);
    return Promise.resolve(Readable.from([]));
  }

  exec(nameOrId: string, request: ExecStartRequest): Promise<StartedExec> {
    this.#record("exec", [nameOrId, request]);
    return Promise.reject(new Error("FakeContainerClient does not run processes"));
  }

  putArchive(nameOrId: string, directory: string, archive: Readable): Promise<void> {
    this.#record("putArchive", [nameOrId, directory]);
    archive.resume();
    return Promise.resolve();
  }

  getArchive(nameOrId: string, source: string): Promise<Readable> {
    this.#record("getArchive", [nameOrId, source]);
    return Promise.resolve(Readable.from([]));
  }

  connect(network: string, nameOrId: string, aliases: string[]): Promise<void> {
    this.#record("connect", [network, nameOrId, aliases]);
    return Promise.resolve();
  }
}

function detailsOf(container: FakeContainer): ContainerDetails {
  return {
    id: container.id,
    name: container.name,
    image: container.image,
    imageId: container.imageId,
    labels: { ...container.labels },
    createdAt: container.createdAt,
    state: { ...container.state },
  };
}
