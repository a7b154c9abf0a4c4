import { createHash } from "node:crypto";
import path from "node:path";
import { PassThrough } from "node:stream";
import { createInterface } from "node:readline";

import type Docker from "dockerode";

import {
  SandboxStartError,
  createSilentLogger,
  sleep,
  throwIfAborted,
  type Logger,
} from "../../../common/index.js";
import type { EgressSpec, SandboxSpec } from "../../spec.js";
import { dockerStatusOf, toSandboxError } from "../docker-errors.js";
import type { DockerEngine } from "../engine.js";
import { SandboxContainers } from "../manager-containers.js";
import type { SandboxImageOptions } from "../sandbox-image.js";
import { EgressProxyImage } from "./proxy-image.js";
import { parseEgressLine, type EgressDecision } from "./access-log.js";
import { readyMarker, squidConfig } from "./squid-config.js";
import type { UpstreamProxy } from "./upstream-proxy.js";

/** Labels of the proxy container and the internal network (never `cordon.managed`: not sandboxes). */
export const egressLabels = {
  /** The sandbox container this proxy (or network) belongs to. */
  sandbox: "cordon.egress.sandbox",
  /** The state directory whose manager made it (list and prune stay in it). */
  home: "cordon.home",
  /** The allowlist, comma-separated, for `sandbox list`. */
  allow: "cordon.egress.allow",
  /** Hash of the squid.conf: another one means another policy, and the proxy is replaced. */
  configHash: "cordon.egress.config-hash",
} as const;

/** A proxy as `sandbox list` shows it. */
export interface EgressProxySummary {
  name: string;
  sandbox: string;
  state: string;
  allow: string[];
}

export interface EgressProxiesOptions {
  engine: DockerEngine;
  stateDirectory: string;
  /** The host's own proxy, which the egress proxy goes through (upstreamProxyFromEnv). */
  upstream?: UpstreamProxy | undefined;
  /** How to build the proxy image (its base); the Dockerfile is images/egress-proxy.Dockerfile. */
  imageOptions?: Pick<SandboxImageOptions, "baseImage"> | undefined;
  logger?: Logger | undefined;
}

const readyTimeoutMs = 20_000;

/**
 * One egress proxy per sandbox (docs/network.md): an internal Docker network with no route out
 * that the sandbox joins, and a squid container on that network and on the default bridge that
 * admits the allowed hosts only. Per sandbox rather than shared, so one sandbox's allowlist,
 * decisions and lifetime never mix with another's, and removing a sandbox removes its way out.
 */
export class EgressProxies {
  private readonly engine: DockerEngine;
  private readonly stateDirectory: string;
  private readonly containers: SandboxContainers;
  private readonly image: EgressProxyImage;
  private readonly logger: Logger;

  constructor(private readonly options: EgressProxiesOptions) {
    this.engine = options.engine;
    this.stateDirectory = path.resolve(options.stateDirectory);
    this.containers = new SandboxContainers(options.engine);
    this.image = new EgressProxyImage(options.engine, options.imageOptions);
    this.logger = options.logger ?? createSilentLogger();
  }

  /**
   * Makes the network and proxy of `spec.egress` exist and run with exactly its allowlist, before
   * the sandbox container is created on that network; with no egress, removes what an earlier
   * policy of this sandbox left.
   */
  async ensure(
    spec: Pick<SandboxSpec, "containerName" | "egress">,
    options: { signal?: AbortSignal | undefined; onProgress?: (message: string) => void } = {},
  ): Promise<void> {
    const egress = spec.egress;
    if (!egress) {
      await this.remove(spec.containerName);
      return;
    }
    const config = squidConfig(egress, this.options.upstream);
    const configHash = createHash("sha256").update(config).digest("hex").slice(0, 16);
    const existing = await this.containers.inspect(egress.proxyContainer);
    if (existing) {
      this.assertOurs(existing.Config.Labels, egress.proxyContainer, spec.containerName);
      if (
        existing.State.Running &&
        existing.Config.Labels?.[egressLabels.configHash] === configHash
      ) {
        return;
      }
      await this.containers.remove(existing.Id, egress.proxyContainer);
    }
    await this.ensureNetwork(egress, spec.containerName);
    const image = await this.image.resolve((text) => options.onProgress?.(text));
    throwIfAborted(options.signal, "egress proxy start");
    options.onProgress?.(
      `starting the egress proxy ${egress.proxyContainer} (${egress.allow.join(", ")})`,
    );
    const container = await this.containers.create(
      this.proxyOptions(egress, spec.containerName, image, config, configHash),
    );
    if (!container) {
      throw new SandboxStartError(
        `another process is creating the egress proxy ${egress.proxyContainer}`,
        {
          fix: "run the command again",
        },
      );
    }
    try {
      await this.engine.client
        .getNetwork(egress.network)
        .connect({ Container: container.id, EndpointConfig: { Aliases: [egress.proxyHost] } });
      await this.containers.start(container.id, egress.proxyContainer);
      await this.waitReady(container.id, egress.proxyContainer, options.signal);
    } catch (error) {
      await this.containers.remove(container.id, egress.proxyContainer).catch(() => undefined);
      throw error instanceof SandboxStartError
        ? error
        : toSandboxError(error, `start the egress proxy ${egress.proxyContainer}`);
    }
  }

  /** Removes the proxy and the network of a sandbox (after its container is gone); none is fine. */
  async remove(sandbox: string): Promise<void> {
    const filters = {
      label: [`${egressLabels.sandbox}=${sandbox}`, `${egressLabels.home}=${this.stateDirectory}`],
    };
    const proxies = await this.engine.client
      .listContainers({ all: true, filters })
      .catch((error: unknown) => {
        throw toSandboxError(error, "list egress proxies");
      });
    for (const proxy of proxies) await this.containers.remove(proxy.Id, nameOf(proxy));
    const networks = await this.engine.client.listNetworks({ filters }).catch((error: unknown) => {
      throw toSandboxError(error, "list egress networks");
    });
    for (const network of networks) {
      try {
        await this.engine.client.getNetwork(network.Id).remove();
      } catch (error) {
        if (dockerStatusOf(error) !== 404)
          throw toSandboxError(error, `remove the network ${network.Name}`);
      }
    }
  }

  /** Every proxy of this state directory, for `sandbox list` and prune. */
  async list(): Promise<EgressProxySummary[]> {
    const proxies = await this.engine.client
      .listContainers({
        all: true,
        filters: { label: [egressLabels.sandbox, `${egressLabels.home}=${this.stateDirectory}`] },
      })
      .catch((error: unknown) => {
        throw toSandboxError(error, "list egress proxies");
      });
    return proxies.map((proxy) => ({
      name: nameOf(proxy),
      sandbox: proxy.Labels[egressLabels.sandbox] ?? "",
      state: proxy.State,
      allow: (proxy.Labels[egressLabels.allow] ?? "").split(",").filter(Boolean),
    }));
  }

  /**
   * The sandboxes that have a proxy or a network in this state directory, with when the newest
   * of them was made (a network may be left without its proxy).
   */
  async owners(): Promise<{ sandbox: string; createdAtMs: number }[]> {
    const filters = {
      label: [egressLabels.sandbox, `${egressLabels.home}=${this.stateDirectory}`],
    };
    const [proxies, networks] = await Promise.all([
      this.engine.client.listContainers({ all: true, filters }),
      this.engine.client.listNetworks({ filters }),
    ]).catch((error: unknown) => {
      throw toSandboxError(error, "list egress proxies and networks");
    });
    const owners = new Map<string, number>();
    const add = (sandbox: string | undefined, createdAtMs: number) => {
      if (sandbox) owners.set(sandbox, Math.max(owners.get(sandbox) ?? 0, createdAtMs));
    };
    for (const proxy of proxies) add(proxy.Labels[egressLabels.sandbox], proxy.Created * 1000);
    for (const network of networks) {
      add(network.Labels?.[egressLabels.sandbox], Date.parse(network.Created) || Date.now());
    }
    return [...owners].map(([sandbox, createdAtMs]) => ({ sandbox, createdAtMs }));
  }

  /**
   * Follows the proxy's access log from `sinceMs` on and calls `onDecision` for each request it
   * admitted or refused; returns a function that stops following.
   */
  follow(
    egress: EgressSpec,
    sinceMs: number,
    onDecision: (decision: EgressDecision) => void,
  ): () => void {
    let stopped = false;
    let stream: NodeJS.ReadableStream | undefined;
    const container = this.engine.client.getContainer(egress.proxyContainer);
    void container
      .logs({
        follow: true,
        stdout: true,
        stderr: false,
        timestamps: true,
        since: Math.floor(sinceMs / 1000),
      })
      .then((logs) => {
        stream = logs;
        if (stopped) return void (stream as unknown as { destroy(): void }).destroy();
        const stdout = new PassThrough();
        this.engine.client.modem.demuxStream(stream, stdout, new PassThrough());
        stream.on("end", () => stdout.end());
        createInterface({ input: stdout }).on("line", (line) => {
          const space = line.indexOf(" ");
          // Docker's RFC 3339 time with nanoseconds; milliseconds are enough to drop older lines.
          const at = Date.parse(`${line.slice(0, Math.min(23, space))}Z`);
          if (Number.isFinite(at) && at < sinceMs) return;
          const decision = parseEgressLine(line.slice(space + 1));
          if (decision) onDecision(decision);
        });
      })
      .catch((error: unknown) =>
        this.logger.warn({ err: error }, "cannot follow the egress proxy's log"),
      );
    return () => {
      stopped = true;
      (stream as unknown as { destroy?: () => void } | undefined)?.destroy?.();
    };
  }

  private async ensureNetwork(egress: EgressSpec, sandbox: string): Promise<void> {
    const network = this.engine.client.getNetwork(egress.network);
    const found = await network.inspect().catch((error: unknown) => {
      if (dockerStatusOf(error) === 404) return undefined;
      throw toSandboxError(error, `inspect the network ${egress.network}`);
    });
    if (found) {
      const info = found as { Internal?: boolean; Labels?: Record<string, string> };
      this.assertOurs(info.Labels, egress.network, sandbox);
      if (info.Internal) return;
      throw new SandboxStartError(`the network ${egress.network} is not internal`, {
        fix: `remove it (\`docker network rm ${egress.network}\`) and run again`,
      });
    }
    try {
      await this.engine.client.createNetwork({
        Name: egress.network,
        // No gateway out: the only thing a container on it reaches is what else is on it.
        Internal: true,
        CheckDuplicate: true,
        Labels: { [egressLabels.sandbox]: sandbox, [egressLabels.home]: this.stateDirectory },
      });
    } catch (error) {
      // Another process made it a moment ago.
      if (dockerStatusOf(error) === 409) return;
      throw toSandboxError(error, `create the internal network ${egress.network}`);
    }
  }

  private assertOurs(
    labels: Record<string, string> | undefined,
    name: string,
    sandbox: string,
  ): void {
    if (
      labels?.[egressLabels.sandbox] === sandbox &&
      labels[egressLabels.home] === this.stateDirectory
    )
      return;
    throw new SandboxStartError(
      `${name} exists but cordon did not make it for ${sandbox}; cordon will not use or remove it`,
      {
        fix: `if it is not yours to keep, remove it (\`docker rm -f ${name}\` or \`docker network rm ${name}\`)`,
      },
    );
  }

  private proxyOptions(
    egress: EgressSpec,
    sandbox: string,
    image: string,
    config: string,
    configHash: string,
  ): Docker.ContainerCreateOptions {
    return {
      name: egress.proxyContainer,
      Image: image,
      Env: [`CORDON_SQUID_CONF=${config}`],
      Labels: {
        [egressLabels.sandbox]: sandbox,
        [egressLabels.home]: this.stateDirectory,
        [egressLabels.allow]: egress.allow.join(","),
        [egressLabels.configHash]: configHash,
      },
      HostConfig: {
        // The default bridge is its way to the allowed hosts (or the host's upstream proxy); the
        // internal network, connected before start, is the sandbox's way to it.
        NetworkMode: "bridge",
        ReadonlyRootfs: true,
        Tmpfs: {
          "/tmp": "rw,nosuid,nodev,size=1m",
          "/run": "rw,nosuid,nodev,size=1m",
          "/var/spool/squid": "rw,nosuid,nodev,size=1m",
          "/var/log/squid": "rw,nosuid,nodev,size=1m",
        },
        CapDrop: ["ALL"],
        SecurityOpt: ["no-new-privileges:true"],
        Init: true,
        Memory: 256 * 1024 * 1024,
        MemorySwap: 256 * 1024 * 1024,
        PidsLimit: 64,
        LogConfig: { Type: "json-file", Config: { "max-size": "5m", "max-file": "1" } },
      },
    };
  }

  /** Until squid says it listens; a proxy that exits first fails with its last words. */
  private async waitReady(
    id: string,
    name: string,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const container = this.engine.client.getContainer(id);
    const deadline = Date.now() + readyTimeoutMs;
    while (Date.now() < deadline) {
      throwIfAborted(signal, "egress proxy start");
      const logs = (await container.logs({ stdout: true, stderr: true })).toString("utf8");
      if (logs.includes(readyMarker)) return;
      const info = await container.inspect();
      if (!info.State.Running) {
        throw new SandboxStartError(
          `the egress proxy ${name} stopped (exit code ${info.State.ExitCode}): ${logs.trim().split("\n").slice(-3).join(" | ")}`,
          { fix: "rebuild its image: `docker rmi` the cordon-egress-proxy tags and run again" },
        );
      }
      await sleep(100, signal);
    }
    throw new SandboxStartError(
      `the egress proxy ${name} did not start listening in ${readyTimeoutMs / 1000} s`,
      {
        fix: `look at \`docker logs ${name}\``,
      },
    );
  }
}

function nameOf(container: Docker.ContainerInfo): string {
  return (container.Names[0] ?? container.Id).replace(/^\//, "");
}
