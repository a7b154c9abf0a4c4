import { createHash } from "node:crypto";
import path from "node:path";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";

import {
  SandboxStartError,
  createSilentLogger,
  sleep,
  throwIfAborted,
  type Logger,
} from "../../../common/index.js";
import type { EgressSpec, SandboxSpec } from "../../spec.js";
import type { ContainerClient, CreateContainerRequest, NetworkClient } from "../client/index.js";
import { toSandboxError } from "../docker-errors.js";
import type { DockerEngine } from "../engine.js";
import type { SandboxImageOptions } from "../sandbox-image.js";
import type { CreateContainerFrom } from "../support-volumes.js";
import { EgressProxyImage } from "./proxy-image.js";
import { parseEgressLine, type EgressDecision } from "./access-log.js";
import { readyMarker, squidConfig } from "./squid-config.js";
import type { UpstreamProxy } from "./upstream-proxy.js";
import { executorContainerDirectory } from "../resident/executor-binary.js";

/**
 * Labels of the proxy container (never `cordon.managed`: not a sandbox). Networks with them are
 * what earlier versions made per sandbox; `remove` and prune still clear them.
 */
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
/** Log lines still arriving when a lease ends are waited for until none came for this long… */
const followQuietMs = 250;
/** …but no longer than this. */
const followDrainMaxMs = 2_000;

/**
 * One egress proxy per sandbox (docs/network.md): a squid container on the default bridge that
 * admits the allowed hosts only. The sandbox itself has no network; cordon forwards its loopback
 * proxy port over the sandbox's executor stream, and on to squid's loopback over an executor in
 * this container (proxy-channel.ts). Per sandbox
 * rather than shared, so one sandbox's allowlist, decisions and lifetime never mix with
 * another's, and removing a sandbox removes its way out.
 */
export class EgressProxies {
  private readonly containers: ContainerClient;
  private readonly networks: NetworkClient;
  private readonly stateDirectory: string;
  private readonly image: EgressProxyImage;
  private readonly logger: Logger;

  constructor(private readonly options: EgressProxiesOptions) {
    this.containers = options.engine.containers;
    this.networks = options.engine.networks;
    this.stateDirectory = path.resolve(options.stateDirectory);
    this.image = new EgressProxyImage(options.engine, options.imageOptions);
    this.logger = options.logger ?? createSilentLogger();
  }

  /**
   * Makes the proxy of `spec.egress` exist and run with exactly its allowlist; with no egress,
   * removes what an earlier policy of this sandbox left.
   */
  async ensure(
    spec: Pick<SandboxSpec, "containerName" | "egress">,
    options: {
      signal?: AbortSignal | undefined;
      onProgress?: (message: string) => void;
      /**
       * The support volume of cordon's resident executor (executor-binary.ts), mounted in the
       * proxy: it is how cordon's process reaches squid (proxy-channel.ts). Asked only when the
       * sandbox has egress.
       */
      executorVolume?: () => Promise<string | undefined>;
      /**
       * Creates the proxy's container (default: `containers.create`): the manager's makes sure
       * the executor's volume was not removed meanwhile (`SupportVolumes.createContainer`).
       */
      create?: CreateContainerFrom | undefined;
    } = {},
  ): Promise<void> {
    const egress = spec.egress;
    if (!egress) {
      await this.remove(spec.containerName);
      return;
    }
    const executorVolume = await options.executorVolume?.();
    if (executorVolume === undefined) {
      throw new SandboxStartError(
        `cordon's resident executor is not built, and it is how cordon reaches the egress proxy of ${spec.containerName}`,
        { fix: "build it (`npm run build` needs gcc), or run without an egress allowlist" },
      );
    }
    const config = squidConfig(egress, this.options.upstream);
    const configHash = proxyConfigHash(config, executorVolume);
    const existing = await this.containers.inspect(egress.proxyContainer);
    if (existing) {
      this.assertOurs(existing.labels, egress.proxyContainer, spec.containerName);
      if (existing.state.running && existing.labels[egressLabels.configHash] === configHash) {
        return;
      }
      await this.containers.remove(existing.id, egress.proxyContainer);
    }
    const image = await this.image.resolve((text) => options.onProgress?.(text));
    throwIfAborted(options.signal, "egress proxy start");
    options.onProgress?.(
      `starting the egress proxy ${egress.proxyContainer} (${egress.allow.length > 0 ? egress.allow.join(", ") : "no host allowed"})`,
    );
    const request = async (): Promise<CreateContainerRequest> => {
      // Asked again: a retry of `create` follows a volume made anew.
      const volume = (await options.executorVolume?.()) ?? executorVolume;
      return this.proxyOptions({
        egress,
        sandbox: spec.containerName,
        image,
        config,
        configHash: proxyConfigHash(config, volume),
        executorVolume: volume,
      });
    };
    const id = options.create
      ? await options.create(request)
      : await this.containers.create(await request());
    if (id === undefined) {
      throw new SandboxStartError(
        `another process is creating the egress proxy ${egress.proxyContainer}`,
        {
          fix: "run the command again",
        },
      );
    }
    try {
      await this.containers.start(id, egress.proxyContainer);
      await this.waitReady(id, egress.proxyContainer, options.signal);
    } catch (error) {
      await this.containers.remove(id, egress.proxyContainer).catch(() => undefined);
      throw error instanceof SandboxStartError
        ? error
        : toSandboxError(error, `start the egress proxy ${egress.proxyContainer}`);
    }
  }

  /**
   * Removes the proxy of a sandbox (after its container is gone), and an internal network an
   * earlier version made for it; none is fine.
   */
  async remove(sandbox: string): Promise<void> {
    const labels = [
      `${egressLabels.sandbox}=${sandbox}`,
      `${egressLabels.home}=${this.stateDirectory}`,
    ];
    const proxies = await this.containers.list({ labels });
    for (const proxy of proxies) await this.containers.remove(proxy.id, proxy.name);
    for (const network of await this.networks.list(labels)) {
      await this.networks.remove(network.id);
    }
  }

  /** Every proxy of this state directory, for `sandbox list` and prune. */
  async list(): Promise<EgressProxySummary[]> {
    const proxies = await this.containers.list({
      labels: [egressLabels.sandbox, `${egressLabels.home}=${this.stateDirectory}`],
    });
    return proxies.map((proxy) => ({
      name: proxy.name,
      sandbox: proxy.labels[egressLabels.sandbox] ?? "",
      state: proxy.status,
      allow: (proxy.labels[egressLabels.allow] ?? "").split(",").filter(Boolean),
    }));
  }

  /**
   * The sandboxes that have a proxy or a network in this state directory, with when the newest
   * of them was made (a network may be left without its proxy).
   */
  async owners(): Promise<{ sandbox: string; createdAtMs: number }[]> {
    const labels = [egressLabels.sandbox, `${egressLabels.home}=${this.stateDirectory}`];
    const [proxies, networks] = await Promise.all([
      this.containers.list({ labels }),
      this.networks.list(labels),
    ]);
    const owners = new Map<string, number>();
    const add = (sandbox: string | undefined, createdAtMs: number) => {
      if (sandbox) owners.set(sandbox, Math.max(owners.get(sandbox) ?? 0, createdAtMs));
    };
    for (const proxy of proxies) add(proxy.labels[egressLabels.sandbox], proxy.createdAtMs);
    for (const network of networks) {
      add(network.labels[egressLabels.sandbox], network.createdAtMs || Date.now());
    }
    return [...owners].map(([sandbox, createdAtMs]) => ({ sandbox, createdAtMs }));
  }

  /**
   * Follows the proxy's access log from `sinceMs` on and calls `onDecision` for each request it
   * admitted or refused; returns a function that stops following once the log has been quiet a
   * moment. squid logs a tunnel when it closes, and a client's connections close only as its
   * process exits: their lines arrive after the command's exit (the channel's end travels the
   * executor's stream behind it, then squid, then the engine's log stream).
   */
  follow(
    egress: EgressSpec,
    sinceMs: number,
    onDecision: (decision: EgressDecision) => void,
  ): () => Promise<void> {
    let stopped = false;
    let stream: Readable | undefined;
    let lastLineAt = performance.now();
    void this.containers
      .followStdout(egress.proxyContainer, { sinceSeconds: Math.floor(sinceMs / 1000) })
      .then((stdout) => {
        stream = stdout;
        if (stopped) return void stream.destroy();
        createInterface({ input: stdout }).on("line", (line) => {
          lastLineAt = performance.now();
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
    return async () => {
      const until = performance.now() + followDrainMaxMs;
      do {
        await sleep(followQuietMs);
      } while (
        stream &&
        performance.now() - lastLineAt < followQuietMs &&
        performance.now() < until
      );
      stopped = true;
      stream?.destroy();
    };
  }

  private assertOurs(
    labels: Readonly<Record<string, string>> | undefined,
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

  private proxyOptions(input: {
    egress: EgressSpec;
    sandbox: string;
    image: string;
    config: string;
    configHash: string;
    executorVolume: string;
  }): CreateContainerRequest {
    const { egress, sandbox, image, config, configHash, executorVolume } = input;
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
        // The default bridge is its way out to the allowed hosts (or the host's upstream proxy),
        // nothing more: cordon's process reaches squid through the executor below, not over the
        // bridge, and no port is published.
        NetworkMode: "bridge",
        // Read-only and root-owned: squid's user can run the executor, never change it.
        Mounts: [
          {
            Type: "volume",
            Source: executorVolume,
            Target: executorContainerDirectory,
            ReadOnly: true,
          },
        ],
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
    const deadline = Date.now() + readyTimeoutMs;
    while (Date.now() < deadline) {
      throwIfAborted(signal, "egress proxy start");
      const logs = (await this.containers.logs(id, { stdout: true, stderr: true })).toString(
        "utf8",
      );
      if (logs.includes(readyMarker)) return;
      const info = await this.containers.inspect(id);
      if (!info?.state.running) {
        throw new SandboxStartError(
          `the egress proxy ${name} stopped (exit code ${info?.state.exitCode ?? "unknown: it is gone"}): ${logs.trim().split("\n").slice(-3).join(" | ")}`,
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

/** The executor's volume too: a proxy made without it (or with an older one) is replaced. */
function proxyConfigHash(config: string, executorVolume: string): string {
  return createHash("sha256")
    .update(config)
    .update(`\0${executorVolume}`)
    .digest("hex")
    .slice(0, 16);
}
