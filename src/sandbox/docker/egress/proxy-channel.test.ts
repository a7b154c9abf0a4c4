import { once } from "node:events";
import { connect, createServer, type Server, type Socket } from "node:net";

import { afterEach, describe, expect, it } from "vitest";

import type { ContainerClient } from "../client/index.js";
import { builtExecutorBinary } from "../resident/testing/built-executor.js";
import { localExecutor, type LocalExecutor } from "../resident/testing/local-executor.js";
import { proxyChannel, type ProxyChannel } from "./proxy-channel.js";

// Built now if its source changed; a missing or stale binary fails here, naming the fix.
const binary = await builtExecutorBinary();

/** A process by pid exists (the executor is our child: signal 0 reaches it). */
const running = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt += 1) {
    if (condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${what}: not after 15 s`);
}

async function listen(
  handler: (socket: Socket) => void,
): Promise<{ server: Server; port: number }> {
  const server = createServer(handler);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  return { server, port: address.port };
}

/**
 * The stream to the executor in a sandbox's squid container is the sandbox's holders' to close:
 * the real executor binary stands in that container (run here), a local server for squid.
 */
describe("proxyChannel", () => {
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it("closes the stream to the proxy's executor when the last holder releases it, and opens a new one after", async () => {
    const squid = await listen((socket) => socket.end("answered by squid\n"));
    cleanups.push(() => squid.server.close());
    const executors: LocalExecutor[] = [];
    const holder = (): ProxyChannel =>
      proxyChannel({
        containers: {} as ContainerClient,
        proxyContainer: "cordon-test-sandbox-egress",
        proxyPort: squid.port,
        executorIn: () => {
          const executor = localExecutor(binary);
          executors.push(executor);
          return executor;
        },
      });
    // What the sandbox's forwarded port hands over: one connection, relayed to squid.
    const through = async (proxy: ProxyChannel): Promise<string> => {
      const sandboxSide = await listen((socket) => proxy.destination(socket));
      cleanups.push(() => sandboxSide.server.close());
      const client = connect({ host: "127.0.0.1", port: sandboxSide.port });
      let answer = "";
      client.setEncoding("utf8").on("data", (chunk: string) => (answer += chunk));
      await once(client, "close");
      return answer;
    };

    const first = holder();
    const second = holder();
    expect(await through(first)).toBe("answered by squid\n");
    expect(await through(second)).toBe("answered by squid\n");
    // One executor for both holders of that proxy.
    expect(executors).toHaveLength(1);
    const pid = executors[0]?.pid ?? 0;
    expect(running(pid)).toBe(true);

    first.release();
    first.release(); // idempotent: it does not count for the other holder
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(running(pid)).toBe(true);

    second.release();
    await until(() => !running(pid), "the executor still runs after its last holder let go");

    // A new lease over the same sandbox reaches squid again, through a new executor.
    const third = holder();
    cleanups.push(() => third.release());
    expect(await through(third)).toBe("answered by squid\n");
    expect(executors).toHaveLength(2);
  });
});
