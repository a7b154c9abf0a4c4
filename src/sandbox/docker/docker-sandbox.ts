import type { Duplex } from "node:stream";

import { SandboxError, createSilentLogger, type Logger } from "../../common/index.js";
import { ShellSandbox } from "../shell-sandbox.js";
import type { DockerEngine } from "./engine.js";
import type { ManagedContainer } from "./manager.js";
import { ContainerExec } from "./exec/container-exec.js";
import { ContainerFiles, type DockerSandboxFiles } from "./files/container-files.js";
import { proxyChannel, type ProxyChannel } from "./egress/proxy-channel.js";
import {
  ResidentTransport,
  type OpenForward,
  type PortForward,
} from "./resident/resident-transport.js";
import type { ChannelDestination } from "./resident/resident-connection.js";
import type { SandboxQuiet } from "./sandbox-quiet.js";

/** Where background processes and full output logs live inside the container. */
const containerProcessDirectory = "/tmp/.cordon/proc";
const containerLogDirectory = "/tmp/.cordon/logs";

export interface DockerSandboxOptions {
  engine: DockerEngine;
  /** The running container's id. */
  containerId: string;
  /** Its name; also the sandbox id. */
  containerName: string;
  /** Where relative paths resolve and commands start, e.g. "/workspace". */
  workdir: string;
  /** "uid:gid" every command and file operation runs as. */
  user: string;
  /**
   * Replaces the container when it went away mid-session (the manager's `recover`), so the next
   * call after a killed container gets a fresh one instead of failing for the rest of the run.
   */
  recover?: ((options?: { signal?: AbortSignal | undefined }) => Promise<string>) | undefined;
  /**
   * Why the manager stopped the container on purpose (it wrote past its disk budget), if it did:
   * a command cut off by that stop fails with this error instead of a generic "stopped" one.
   */
  stopReason?: (() => SandboxError | undefined) | undefined;
  logger?: Logger | undefined;
  /**
   * "resident": calls go through a resident executor in the container (the container must have
   * been created with it mounted: `sandbox.docker.executor`), falling back to plain exec when it
   * is not running. "exec" (default here): one Docker exec per call.
   */
  executor?: "resident" | "exec" | undefined;
  /**
   * Ports forwarded into the sandbox over the resident executor's stream (its egress proxy): they
   * listen on 127.0.0.1 there before the first call runs, and again after an executor restart.
   */
  forwards?: readonly PortForward[] | undefined;
  /** Its way to its egress proxy, let go by `release()`. */
  proxy?: ProxyChannel | undefined;
}

/**
 * A `Sandbox` in a running Docker container. Every command and every file operation is an exec
 * inside the container as the container's user, so read-only mounts, tmpfs, permissions and
 * symlinks are what the container's kernel says they are; no host path is ever touched (but by
 * `files.copyTreeIn` / `files.copyTreeOut`, which the caller names). The manager creates the
 * container; this object only uses it.
 */
export class DockerSandbox extends ShellSandbox<DockerSandboxFiles> {
  readonly id: string;
  readonly kind = "docker" as const;

  /**
   * The sandbox of a container the manager hands out (its `createSandbox`), as cordon itself makes
   * it: the container's user and workdir, the manager's recovery and stop reason, its executor.
   */
  static forContainer(
    engine: DockerEngine,
    container: ManagedContainer,
    logger?: Logger,
  ): DockerSandbox {
    const egress = container.spec.egress;
    const proxy =
      egress &&
      proxyChannel({
        containers: engine.containers,
        proxyContainer: egress.proxyContainer,
        proxyPort: egress.proxyPort,
        logger,
      });
    return new DockerSandbox({
      engine,
      containerId: container.containerId,
      containerName: container.containerName,
      workdir: container.workdir,
      user: container.user,
      recover: container.recover,
      stopReason: container.stopReason,
      logger,
      executor: container.spec.docker.executor,
      // The sandbox's only way out: its proxy's port, forwarded to the proxy from cordon's side.
      forwards: egress && proxy && [{ port: egress.proxyPort, destination: proxy.destination }],
      proxy,
    });
  }

  /**
   * `forContainer`, with the sandbox's forwarded ports listening before it is returned: what the
   * manager hands out, so a failure to forward fails the acquire, not the agent's first command.
   */
  static async attach(
    engine: DockerEngine,
    container: ManagedContainer,
    logger?: Logger,
  ): Promise<DockerSandbox> {
    const sandbox = DockerSandbox.forContainer(engine, container, logger);
    try {
      if (container.spec.egress) await sandbox.openForwards();
    } catch (error) {
      sandbox.release();
      throw error;
    }
    return sandbox;
  }

  constructor(options: DockerSandboxOptions) {
    const logger = (options.logger ?? createSilentLogger()).child({
      sandbox: options.containerName,
    });
    const recover = options.recover;
    const plainExec = new ContainerExec(
      options.engine.containers,
      options.containerId,
      options.containerName,
      options.user,
      { recover: recover && (() => recover()), stopReason: options.stopReason },
    );
    const resident =
      options.executor === "resident"
        ? new ResidentTransport(plainExec, logger, options.forwards)
        : undefined;
    const transport = resident ?? plainExec;
    super({
      commands: {
        transport,
        workdir: options.workdir,
        root: "/",
        logDirectory: containerLogDirectory,
        logger,
      },
      files: new ContainerFiles(transport, options.workdir, logger),
      processDirectory: containerProcessDirectory,
    });
    this.id = options.containerName;
    this.#resident = resident;
    this.#containerName = options.containerName;
    this.#proxy = options.proxy;
  }

  readonly #resident: ResidentTransport | undefined;
  readonly #containerName: string;
  readonly #proxy: ProxyChannel | undefined;

  /**
   * The lease over this sandbox ended: what this object holds outside the container is let go
   * (the stream to its egress proxy's executor, once no other sandbox object holds it). The
   * container, its executor and its forwards stay for the next lease.
   */
  release(): void {
    this.#proxy?.release();
  }

  /** See `SandboxQuiet`; undefined by plain exec (no executor to ask). */
  quiet(): Promise<SandboxQuiet | undefined> {
    return this.#resident?.quiet() ?? Promise.resolve(undefined);
  }

  /** Waits until the sandbox's forwarded ports listen (starting its executor if needed). */
  async openForwards(): Promise<void> {
    await this.#residentTransport().openForwards();
  }

  /**
   * Forwards a port into the sandbox (127.0.0.1:`port`, 0 = a free one) to `destination`, which
   * cordon chooses here and the sandbox cannot change, until `close()`.
   */
  forwardPort(port: number, destination: ChannelDestination): Promise<OpenForward> {
    return this.#residentTransport().forward({ port, destination });
  }

  /**
   * A connection to 127.0.0.1:`port` inside the sandbox, over its executor's stream (`cordon
   * port-forward`); fails with `PortClosedError` when nothing listens there.
   */
  connectPort(port: number): Promise<Duplex> {
    return this.#residentTransport().connect(port);
  }

  #residentTransport(): ResidentTransport {
    if (this.#resident) return this.#resident;
    throw new SandboxError(
      `cannot forward ports into ${this.#containerName}: it runs commands by plain exec`,
      { fix: 'set sandbox.docker.executor "resident" (the default)' },
    );
  }
}
