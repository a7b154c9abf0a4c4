import { connect } from "node:net";
import type { Duplex } from "node:stream";

import { createSilentLogger, type Logger } from "../../../common/index.js";
import type { ContainerClient } from "../client/index.js";

/** The network the egress proxy container is on, where the host reaches it (docs/network.md). */
const proxyNetwork = "bridge";

export interface ProxyChannelOptions {
  containers: ContainerClient;
  /** The sandbox's egress proxy container (`EgressSpec.proxyContainer`). */
  proxyContainer: string;
  /** The port squid listens on in its container. */
  proxyPort: number;
  logger?: Logger | undefined;
}

/**
 * Where a connection to the sandbox's forwarded proxy port goes: a TCP connection from cordon's
 * process to the sandbox's own squid, at its address on the default bridge, looked up for each
 * connection (a replaced proxy has a new address). Nothing the sandbox sends chooses this: the
 * destination is the proxy of this sandbox, fixed when cordon forwarded the port; the bytes are
 * relayed untouched and squid decides what they may reach.
 */
export function proxyChannel(options: ProxyChannelOptions): (channel: Duplex) => void {
  const logger = options.logger ?? createSilentLogger();
  return (channel) => {
    void options.containers.inspect(options.proxyContainer).then(
      (proxy) => {
        const address = proxy?.state.running ? proxy.addresses?.[proxyNetwork] : undefined;
        if (!address) {
          logger.warn({ proxy: options.proxyContainer }, "the egress proxy is not running");
          channel.destroy();
          return;
        }
        relay(channel, connect({ host: address, port: options.proxyPort }));
      },
      (error: unknown) => {
        logger.warn({ err: error, proxy: options.proxyContainer }, "cannot find the egress proxy");
        channel.destroy();
      },
    );
  };
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
