import type { Duplex } from "node:stream";

import { createSilentLogger, type Logger } from "../../../common/index.js";
import type { ExecTransport } from "../../shell/exec-transport.js";
import type { ContainerClient } from "../client/index.js";
import { ContainerExec } from "../exec/container-exec.js";
import { ResidentConnection } from "../resident/resident-connection.js";

/**
 * Who the executor runs as in the proxy container: `nobody`, not squid's `proxy` (uid 13), so a
 * squid the sandbox's traffic subverted cannot signal or stop cordon's way in (the executor is
 * not dumpable either: no ptrace, no /proc/<pid>/fd). Any user can connect to squid's port.
 */
const executorUser = "65534:65534";

export interface ProxyChannelOptions {
  containers: ContainerClient;
  /** The sandbox's egress proxy container (`EgressSpec.proxyContainer`). */
  proxyContainer: string;
  /** The port squid listens on in its container. */
  proxyPort: number;
  logger?: Logger | undefined;
  /**
   * Where the executor runs (default: a Docker exec in the proxy container as `nobody`); a test
   * runs the real binary on this machine instead.
   */
  executorIn?: ((proxyContainer: string) => ExecTransport) | undefined;
}

/** A sandbox's way to its proxy: the destination of its forwarded proxy port. */
export interface ProxyChannel {
  /** Takes each connection to the sandbox's proxy port (a `ChannelDestination`). */
  destination: (channel: Duplex) => void;
  /**
   * This holder is done (its lease released): when no other holds the proxy, the stream to the
   * executor there is closed and that executor exits, so a long-lived process keeps no Docker
   * exec (over ssh: no connection) open for a sandbox it no longer uses. Idempotent.
   */
  release(): void;
}

/**
 * The executor of this process in each proxy container, by container name: every sandbox object
 * over one sandbox (a lease per run in a long-lived process) shares it while any holds it. One
 * that stopped (the proxy was replaced or removed) is started again at the next connection.
 */
const links = new Map<string, Promise<ResidentConnection>>();
/** How many unreleased `ProxyChannel`s name each proxy container. */
const holders = new Map<string, number>();

/**
 * Where a connection to the sandbox's forwarded proxy port goes: to 127.0.0.1:`proxyPort` inside
 * the sandbox's own squid container, connected there by cordon's resident executor (mounted in
 * that container from its support volume), over one Docker exec stream cordon holds to it — the
 * mechanism `cordon port-forward` uses toward a sandbox. So cordon needs no route to the engine's
 * bridge (the engine may be elsewhere), and squid publishes nothing. Nothing the sandbox sends
 * chooses this: the destination is the proxy of this sandbox, fixed when cordon forwarded the
 * port; the bytes are relayed untouched and squid decides what they may reach.
 */
export function proxyChannel(options: ProxyChannelOptions): ProxyChannel {
  const logger = options.logger ?? createSilentLogger();
  const name = options.proxyContainer;
  holders.set(name, (holders.get(name) ?? 0) + 1);
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    const left = (holders.get(name) ?? 1) - 1;
    if (left > 0) return void holders.set(name, left);
    holders.delete(name);
    const link = links.get(name);
    links.delete(name);
    // Its channels end with it: the sandbox's connections through the proxy are cut, as they
    // are when the process exits.
    void link?.then(
      (connection) => connection.close(),
      () => undefined,
    );
  };
  const destination = (channel: Duplex): void => {
    void proxyConnection(options, logger)
      .then((connection) => connection.connect(options.proxyPort))
      .then(
        (upstream) => {
          // The sandbox's side went away while squid's was being connected.
          if (channel.destroyed) upstream.destroy();
          else relay(channel, upstream);
        },
        (error: unknown) => {
          logger.warn(
            { err: error, proxy: options.proxyContainer },
            "cannot reach the egress proxy",
          );
          channel.destroy();
        },
      );
  };
  return { destination, release };
}

/** The live executor in the proxy container, started when there is none. */
function proxyConnection(
  options: ProxyChannelOptions,
  logger: Logger,
): Promise<ResidentConnection> {
  const name = options.proxyContainer;
  const known = links.get(name);
  if (known) {
    return known.then((connection) => {
      if (connection.alive) return connection;
      if (links.get(name) === known) links.delete(name);
      return proxyConnection(options, logger);
    });
  }
  // By name: a proxy replaced under the same name is the one reached from then on.
  const exec =
    options.executorIn?.(name) ?? new ContainerExec(options.containers, name, name, executorUser);
  const opening = ResidentConnection.open(exec, logger.child({ proxy: name }));
  links.set(name, opening);
  opening.then(
    (connection) =>
      connection.onStopped(() => {
        if (links.get(name) === opening) links.delete(name);
      }),
    // A failed start is not kept: the next connection tries again.
    () => {
      if (links.get(name) === opening) links.delete(name);
    },
  );
  return opening;
}

/** Bytes both ways, half closes passed on; either side failing ends both. */
export function relay(a: Duplex, b: Duplex): void {
  const fail = (): void => {
    a.destroy();
    b.destroy();
  };
  a.on("error", fail);
  b.on("error", fail);
  a.pipe(b);
  b.pipe(a);
}
