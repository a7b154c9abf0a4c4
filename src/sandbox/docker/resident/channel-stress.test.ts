import { once } from "node:events";
import { connect, createServer, type Server, type Socket } from "node:net";

import { afterEach, describe, expect, it } from "vitest";

import { createSilentLogger } from "../../../common/index.js";
import { startPortForward, type PortForward } from "../../../runner/orchestrate/port-forward.js";
import { relay } from "../egress/proxy-channel.js";
import { builtExecutorBinary } from "./testing/built-executor.js";
import type { ForwardedChannel } from "./forwarded-channel.js";
import { ResidentConnection } from "./resident-connection.js";
import { localExecutor, type LocalExecutor } from "./testing/local-executor.js";

/**
 * Many short connections through the executor's channels, both ways: the shape of an agent's
 * `npm install` through the egress proxy (a forwarded port: many short requests, the far side
 * closing first) and of a browser on `cordon port-forward` (connections made by the executor).
 * Every exchange must get its whole answer; one that moves no byte for `stallMs` fails naming the
 * stall, and afterwards the executor holds no more descriptors than before.
 */

// Built now if its source changed; a missing or stale binary fails here, naming the fix.
const binary = await builtExecutorBinary();
/** No byte for this long is a stall (a loaded 2-core machine moves a chunk in far less). */
const stallMs = 20_000;

/**
 * How one exchange ends. `close`: the client sends its request and keeps its side open, the
 * server answers and closes (HTTP/1.0, python's http.server). `half`: the client shuts down its
 * side after the request and the server answers once it sees that. `drop`: the client destroys
 * its connection as soon as it has the answer, before the server's end.
 */
type Ending = "close" | "half" | "drop";

interface Exchange {
  serial: number;
  size: number;
  ending: Ending;
  /** The client reads nothing for a while first: the answer backs up into the channel. */
  slow?: boolean;
}

/** The largest answer: one that must back up through every buffer into the channel's window. */
const largeBytes = 6 * 1024 * 1024;
/** Byte i is 31·i mod 256: 31 is odd, so every offset mod 256 starts a different sequence. */
const pattern = Buffer.alloc(largeBytes + 256);
for (let i = 0; i < pattern.byteLength; i += 1) pattern[i] = (i * 31) & 0xff;

/** The answer to exchange `seed`: `size` bytes, byte i being (31·i + seed) mod 256. */
function answer(seed: number, size: number): Buffer {
  // 223 is 31's inverse mod 256: from offset 223·seed the pattern reads 31·i + seed.
  const offset = (seed * 223) & 0xff;
  return pattern.subarray(offset, offset + size);
}

/** On 127.0.0.1:`port` (0: a free one), reads `SERIAL SIZE ENDING\n` and answers as the ending says. */
async function startServer(port = 0): Promise<Server> {
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    socket.on("error", () => undefined);
    let head = "";
    let request: [number, number, Ending] | undefined;
    const reply = () => {
      if (!request) return;
      const [serial, size] = request;
      socket.end(answer(serial, size));
    };
    socket.on("data", (chunk: Buffer) => {
      if (request) return;
      head += chunk.toString("latin1");
      const line = /^(\d+) (\d+) (close|half|drop)\n/.exec(head);
      if (!line) return;
      request = [Number(line[1]), Number(line[2]), line[3] as Ending];
      if (request[2] !== "half") reply();
    });
    socket.on("end", () => {
      if (request?.[2] === "half") reply();
      else socket.end();
    });
  });
  server.listen(port, "127.0.0.1");
  await once(server, "listening");
  return server;
}

/** One exchange through `port`; rejects naming the stall when no byte moves for `stallMs`. */
function exchange(port: number, { serial, size, ending, slow }: Exchange): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect({ host: "127.0.0.1", port, allowHalfOpen: true });
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    const settle = (error?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve();
    };
    const stalled = () =>
      settle(
        new Error(
          `exchange ${serial} (${ending}, ${size} bytes) stalled: ${received} bytes came, then nothing for ${stallMs / 1000} s`,
        ),
      );
    let timer = setTimeout(stalled, stallMs);
    const check = () => {
      const got = Buffer.concat(chunks);
      if (!got.equals(answer(serial, size))) {
        settle(
          new Error(`exchange ${serial} (${ending}): ${got.length} of ${size} bytes, or wrong`),
        );
      } else settle();
    };
    socket.on("connect", () => {
      socket.write(`${serial} ${size} ${ending}\n`);
      if (ending === "half") socket.end();
      if (slow) {
        socket.pause();
        setTimeout(() => socket.resume(), 500);
      }
    });
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      received += chunk.byteLength;
      clearTimeout(timer);
      timer = setTimeout(stalled, stallMs);
      if (ending === "drop" && received >= size) check();
    });
    socket.on("end", check);
    socket.on("error", (error) =>
      settle(new Error(`exchange ${serial} (${ending}): ${error.message}`)),
    );
  });
}

/**
 * 500 exchanges: six rounds of 50 at once, then 200 one after another. Most are small; some
 * cross the channel's window, and a few are large and read slowly, so the windows of both sides
 * fill and must be reopened by acknowledgements (a lost one stalls the exchange).
 */
async function exchangeMany(port: number): Promise<void> {
  const endings: Ending[] = ["close", "half", "drop"];
  const plan = (serial: number): Exchange => ({
    serial,
    ending: endings[serial % endings.length] ?? "close",
    size:
      serial % 50 === 0
        ? largeBytes
        : serial % 10 === 0
          ? 300_000
          : ([0, 100, 20_000][serial % 3] ?? 0),
    slow: serial % 50 === 0,
  });
  let serial = 0;
  for (let round = 0; round < 6; round += 1) {
    await Promise.all(Array.from({ length: 50 }, () => exchange(port, plan((serial += 1)))));
  }
  for (let one = 0; one < 200; one += 1) await exchange(port, plan((serial += 1)));
}

/** Polls until `read` gives `wanted` (10 s on a loaded machine); returns what it gave last. */
async function settlesAt(read: () => Promise<number | undefined>, wanted: number | undefined) {
  let last = await read();
  for (let attempt = 0; attempt < 1000 && last !== wanted; attempt += 1) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    last = await read();
  }
  return last;
}

describe("channels under many short connections", { timeout: 180_000 }, () => {
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function open(): Promise<{ executor: LocalExecutor; connection: ResidentConnection }> {
    const executor = localExecutor(binary);
    const connection = await ResidentConnection.open(executor, createSilentLogger());
    cleanups.push(() => connection.close());
    return { executor, connection };
  }

  async function server(): Promise<number> {
    const started = await startServer();
    cleanups.push(() => started.close());
    return (started.address() as { port: number }).port;
  }

  it("connections the executor makes (cordon port-forward): 500 exchanges, each answered whole; no descriptor left", async () => {
    const { executor, connection } = await open();
    const far = await server();
    const forward: PortForward = await startPortForward({
      remotePort: far,
      connect: (port) => connection.connect(port),
    });
    cleanups.push(() => forward.close());
    const before = await executor.descriptors();
    await exchangeMany(forward.localPort);
    expect(await settlesAt(() => executor.descriptors(), before)).toBe(before);
  });

  it("connections accepted on a forwarded port (the egress proxy, the model gateway): 500 exchanges, each answered whole; no descriptor left", async () => {
    const { executor, connection } = await open();
    const far = await server();
    const { port } = await connection.listen(0, (channel) =>
      relay(channel, connect({ host: "127.0.0.1", port: far })),
    );
    const before = await executor.descriptors();
    await exchangeMany(port);
    expect(await settlesAt(() => executor.descriptors(), before)).toBe(before);
  });

  it("a reset is passed on as a reset, both ways, through a forward and through a forwarded port — never as a clean end", async () => {
    const { connection } = await open();
    const farEnds: Promise<string>[] = [];
    const farSockets: Socket[] = [];
    const far = createServer({ allowHalfOpen: true }, (socket) => {
      farSockets.push(socket);
      farEnds.push(howItEnds(socket));
      socket.resume();
    });
    far.listen(0, "127.0.0.1");
    await once(far, "listening");
    cleanups.push(() => far.close());
    const farPort = (far.address() as { port: number }).port;
    const forward = await startPortForward({
      remotePort: farPort,
      connect: (port) => connection.connect(port),
    });
    cleanups.push(() => forward.close());
    const channels: ForwardedChannel[] = [];
    const channelEnds: Promise<string>[] = [];
    const forwarded = await connection.listen(0, (channel) => {
      channels.push(channel);
      channelEnds.push(howItEnds(channel));
      channel.resume();
    });

    const dial = async (port: number) => {
      const socket = connect({ host: "127.0.0.1", port });
      const ends = howItEnds(socket);
      await once(socket, "connect");
      socket.write("a request cut off half way");
      return { socket, ends };
    };
    // The client resets: the server in the sandbox sees a reset, not the end of a request.
    const client = await dial(forward.localPort);
    await waitFor(() => farEnds.length === 1);
    client.socket.resetAndDestroy();
    expect(await farEnds[0]).toBe("ECONNRESET");
    // The server in the sandbox resets: so does the client's connection.
    const other = await dial(forward.localPort);
    await waitFor(() => farSockets.length === 2);
    farSockets[1]?.resetAndDestroy();
    expect(await other.ends).toBe("ECONNRESET");

    // A process in the sandbox resets its connection to a forwarded port: the channel fails.
    const inside = await dial(forwarded.port);
    await waitFor(() => channels.length === 1);
    inside.socket.resetAndDestroy();
    expect(await channelEnds[0]).toBe("ECONNRESET");
    // The destination drops the channel: the process's connection is reset.
    const dropped = await dial(forwarded.port);
    await waitFor(() => channels.length === 2);
    channels[1]?.destroy();
    expect(await dropped.ends).toBe("ECONNRESET");
  });

  it("a forward to a port nothing listens on closes each connection at once, and answers once something does", async () => {
    const { executor, connection } = await open();
    // A port free a moment ago: nothing listens there until the server below takes it.
    const probe = createServer().listen(0, "127.0.0.1");
    await once(probe, "listening");
    const remotePort = (probe.address() as { port: number }).port;
    await new Promise((resolve) => probe.close(resolve));
    const refusals: unknown[] = [];
    const forward = await startPortForward({
      remotePort,
      connect: (port) => connection.connect(port),
      onError: (error) => refusals.push(error),
    });
    cleanups.push(() => forward.close());
    const before = await executor.descriptors();
    const closed = await Promise.all(
      Array.from({ length: 50 }, (_, index) =>
        exchange(forward.localPort, { serial: index, size: 10, ending: "close" }).then(
          () => "answered",
          (error: Error) => (/stalled/.test(error.message) ? error.message : "closed"),
        ),
      ),
    );
    expect(closed).toEqual(Array.from({ length: 50 }, () => "closed"));
    expect(refusals).toHaveLength(50);

    const late = await startServer(remotePort);
    cleanups.push(() => late.close());
    await exchange(forward.localPort, { serial: 1, size: 300_000, ending: "close" });
    expect(await settlesAt(() => executor.descriptors(), before)).toBe(before);
  });
});

/** How a stream ends: its error's code, or "end" for a clean end of its input. */
function howItEnds(stream: Socket | ForwardedChannel): Promise<string> {
  return new Promise((resolve) => {
    stream.on("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "error"));
    stream.on("end", () => resolve("end"));
    stream.on("close", () => resolve("closed"));
  });
}

/** Polls until `condition` holds; a loaded machine gets 10 s, a test never waits on a clock. */
async function waitFor(condition: () => boolean): Promise<void> {
  for (let attempt = 0; attempt < 1000 && !condition(); attempt += 1) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  expect(condition()).toBe(true);
}
