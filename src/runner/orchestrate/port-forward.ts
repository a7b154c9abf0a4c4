import net from "node:net";
import type { Duplex } from "node:stream";

import { ConfigError, SandboxError } from "../../common/index.js";
import type { SandboxLease } from "../../sandbox/index.js";
import { recordForward } from "../session/index.js";

export interface PortForwardOptions {
  /** The port in the sandbox (its 127.0.0.1). */
  remotePort: number;
  /** The port on this host; 0 (the default) picks a free one. */
  localPort?: number | undefined;
  /** The host address to listen on. Default 127.0.0.1: only this host reaches the forward. */
  address?: string | undefined;
  /** Opens one connection to `remotePort` inside the sandbox. */
  connect: (port: number) => Promise<Duplex>;
  /** A connection that could not be carried (nothing listens in the sandbox, the sandbox is gone). */
  onError?: ((error: unknown) => void) | undefined;
}

/** A forward listening on this host; `close()` stops it and cuts its connections. */
export interface PortForward {
  address: string;
  localPort: number;
  remotePort: number;
  close(): Promise<void>;
}

/**
 * `cordon port-forward`: a listener on this host whose every connection is carried to
 * 127.0.0.1:`remotePort` inside the sandbox as one channel of its executor's stream. The sandbox
 * keeps network none: the connection is made from within it, to its own loopback, and nothing in
 * it learns or reaches anything of this host. Bytes are relayed, never read.
 */
export async function startPortForward(options: PortForwardOptions): Promise<PortForward> {
  const address = options.address ?? "127.0.0.1";
  const sockets = new Set<net.Socket>();
  // Half-open: a client that has sent its request and shut down its side still gets the answer.
  const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    connectWithin(options.connect, options.remotePort, connectTimeoutMs).then(
      (channel) => {
        // The client gave up while the sandbox connected: nobody would end this channel.
        if (socket.destroyed) {
          channel.destroy();
          return;
        }
        // A reset either way is passed on as a reset (the channel's destroy resets the
        // connection in the sandbox), so neither end takes a cut-off stream for a finished one.
        const cut = () => {
          socket.resetAndDestroy();
          channel.destroy();
        };
        channel.on("error", cut);
        socket.on("error", cut);
        socket.once("close", () => channel.destroy());
        channel.once("close", () => {
          if (!socket.writableEnded) socket.destroy();
        });
        socket.pipe(channel);
        channel.pipe(socket);
        socket.resume();
      },
      (error: unknown) => {
        // The client sees its connection closed, as for a port nothing listens on.
        socket.destroy();
        options.onError?.(error);
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        error.code === "EADDRINUSE"
          ? new ConfigError(`${address}:${options.localPort ?? 0} is in use on this host`, {
              fix: "choose another local port: cordon port-forward LOCAL:REMOTE (0 or none picks a free one)",
            })
          : new SandboxError(
              `cannot listen on ${address}:${options.localPort ?? 0}: ${error.message}`,
              {
                fix: "check --address: it must be an address of this host",
                cause: error,
              },
            ),
      ),
    );
    server.listen(options.localPort ?? 0, address, () => resolve());
  });
  const bound = server.address() as net.AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    address: bound.address,
    localPort: bound.port,
    remotePort: options.remotePort,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      })),
  };
}

/**
 * How long a connection waits for the sandbox's executor to connect inside: on loopback that is
 * immediate, or refused at once. A connect never answered (a stuck executor) is said as such, and
 * the client's connection closed, instead of leaving the client waiting forever.
 */
const connectTimeoutMs = 30_000;

function connectWithin(
  connect: PortForwardOptions["connect"],
  port: number,
  timeoutMs: number,
): Promise<Duplex> {
  return new Promise<Duplex>((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(
        new SandboxError(
          `the sandbox did not answer a connection to port ${port} within ${timeoutMs / 1000} s`,
          { fix: "check the sandbox is running (`cordon sandbox list`); restart the forward" },
        ),
      );
    }, timeoutMs);
    timer.unref();
    connect(port).then(
      (channel) => {
        clearTimeout(timer);
        if (late) channel.destroy();
        else resolve(channel);
      },
      (error: Error) => {
        clearTimeout(timer);
        if (!late) reject(error);
      },
    );
  });
}

/**
 * `[LOCAL:]REMOTE` as kubectl port-forward takes it: `3000` forwards host 3000 to sandbox 3000,
 * `8080:3000` host 8080 to sandbox 3000, `:3000` a free host port to sandbox 3000.
 */
export function parsePortMapping(text: string): { localPort: number; remotePort: number } {
  const match = /^(?:(\d*):)?(\d+)$/.exec(text.trim());
  const port = (value: string, zero: boolean): number | undefined => {
    const number = Number(value);
    return Number.isInteger(number) && number <= 65535 && (zero || number > 0) ? number : undefined;
  };
  const remote = match?.[2] !== undefined ? port(match[2], false) : undefined;
  const local = match?.[1] === undefined ? remote : match[1] === "" ? 0 : port(match[1], true);
  if (!match || remote === undefined || local === undefined) {
    throw new ConfigError(`${JSON.stringify(text)} is not a port mapping`, {
      fix: "give [LOCAL:]REMOTE with ports 1-65535: 3000, 8080:3000, or :3000 for a free local port",
    });
  }
  return { localPort: local, remotePort: remote };
}

/** What `Runner.forwardPort` takes besides the plan request. */
export interface SandboxPortForwardRequest {
  remotePort: number;
  localPort?: number | undefined;
  address?: string | undefined;
  onError?: ((error: unknown) => void) | undefined;
}

/** A forward into a held sandbox: `close()` stops it and lets the sandbox go. */
export interface SandboxPortForward extends PortForward {
  /** The container forwarded into. */
  sandbox: string;
}

/**
 * Forwards into the sandbox `lease` holds, holding it until `close()`: in this process by the
 * lease, and for every other (an idle stop, a prune, another run's end) by a forward record in
 * `stateDir`, which `sandbox list` and `explain` show too. Releases the lease when the forward
 * cannot start.
 */
export async function forwardLeasePort(
  lease: SandboxLease,
  request: SandboxPortForwardRequest,
  stateDir: string,
): Promise<SandboxPortForward> {
  try {
    const connect = lease.connectPort;
    if (!connect) {
      throw new ConfigError("this sandbox cannot forward ports: it is not a Docker sandbox", {
        fix: 'forward into a sandboxed session (sandbox.mode "all"); a host run\'s servers are on this host already',
      });
    }
    const forward = await startPortForward({ ...request, connect });
    const sandbox = lease.sandbox.id;
    const forget = await recordForward(stateDir, { ...forward, sandbox }).catch(
      async (error: unknown) => {
        await forward.close();
        throw error;
      },
    );
    return {
      ...forward,
      sandbox,
      close: async () => {
        await forward.close();
        await forget();
        await lease.release();
      },
    };
  } catch (error) {
    await lease.release();
    throw error;
  }
}
