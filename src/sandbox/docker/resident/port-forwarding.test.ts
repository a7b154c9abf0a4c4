import { once } from "node:events";
import { connect, createServer, type Socket } from "node:net";
import { createHash, randomBytes } from "node:crypto";

import { afterEach, describe, expect, it } from "vitest";

import { createSilentLogger } from "../../../common/index.js";
import { builtExecutorBinary } from "./testing/built-executor.js";
import type { ForwardedChannel } from "./forwarded-channel.js";
import { request } from "./protocol.js";
import { PortClosedError, ResidentConnection } from "./resident-connection.js";
import { localExecutor } from "./testing/local-executor.js";

// Built now if its source changed; a missing or stale binary fails here, naming the fix.
const binary = await builtExecutorBinary();

// Real processes moving megabytes: a loaded 2-core machine needs more than the unit default.
describe("ports forwarded over the executor's stream", { timeout: 60_000 }, () => {
  let connection: ResidentConnection | undefined;
  afterEach(() => connection?.close());

  async function open(): Promise<ResidentConnection> {
    connection = await ResidentConnection.open(localExecutor(binary), createSilentLogger());
    return connection;
  }

  async function dial(port: number): Promise<Socket> {
    const socket = connect({ host: "127.0.0.1", port });
    await once(socket, "connect");
    return socket;
  }

  it("carries megabytes both ways with half closes, a slow reader holding back only its channel", async () => {
    const executor = await open();
    // The destination echoes, and reads slowly at first: the window, not memory, absorbs it.
    const echo = (channel: ForwardedChannel): void => {
      channel.on("error", () => undefined);
      channel.pause();
      setTimeout(() => channel.pipe(channel), 200);
    };
    const { port } = await executor.listen(0, echo);
    const payload = randomBytes(6 * 1024 * 1024);
    const socket = await dial(port);
    const received: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => received.push(chunk));
    socket.end(payload);
    // A second connection answers while the first one's bytes are still under way.
    const other = await dial(port);
    other.end("ping");
    const [otherReply] = (await once(other, "data")) as [Buffer];
    expect(otherReply.toString()).toBe("ping");
    await once(socket, "end");
    const digest = (data: Buffer) => createHash("sha256").update(data).digest("hex");
    expect(digest(Buffer.concat(received))).toBe(digest(payload));
  });

  it("two listeners on one port share it (another attached cordon process); each channel goes where its listener was told", async () => {
    const executor = await open();
    const seen: string[] = [];
    const answer = (name: string) => (channel: ForwardedChannel) => {
      channel.on("error", () => undefined);
      seen.push(name);
      channel.end(name);
      channel.resume();
    };
    const first = await executor.listen(0, answer("first"));
    const second = await executor.listen(first.port, answer("second"));
    expect(second.port).toBe(first.port);
    executor.unlisten(first.id);
    // Unlisten is not acknowledged: a connection the kernel hands to the first socket before the
    // executor closes it is reset (never given to the first destination) — after the connect, or
    // during it, when the socket closes with the connection still in its queue. Dial until one
    // answers.
    let reply = "";
    for (let attempt = 0; attempt < 50 && reply === ""; attempt += 1) {
      reply = await dial(first.port).then(replyOf, () => "");
    }
    expect(reply).toBe("second");
    expect(seen).toEqual(["second"]);
  });

  it("a connection whose destination goes away is reset in the sandbox; the executor's death resets the rest", async () => {
    const executor = await open();
    const channels: ForwardedChannel[] = [];
    const { port } = await executor.listen(0, (channel) => {
      channel.on("error", () => undefined);
      channels.push(channel);
    });
    const reset = await dial(port);
    const resetError = new Promise<string | undefined>((resolve) => {
      reset.on("error", (error: NodeJS.ErrnoException) => resolve(error.code));
      reset.on("close", () => resolve(undefined));
    });
    await waitFor(() => channels.length === 1);
    channels[0]?.destroy();
    // Reset, not closed: the process cannot take a dropped connection for a finished one.
    expect(await resetError).toBe("ECONNRESET");

    const held = await dial(port);
    await waitFor(() => channels.length === 2);
    const errors: string[] = [];
    channels[1]?.on("error", (error: NodeJS.ErrnoException) => errors.push(error.code ?? ""));
    const closed = new Promise((resolve) => channels[1]?.on("close", resolve));
    executor.close();
    await closed;
    expect(errors).toEqual(["ECONNRESET"]);
    held.destroy();
    // Its listener died with it: nothing accepts on the port once the process is gone.
    // Until the process has exited a probe may still connect: it then closes without an error.
    const codes: string[] = [];
    for (let attempt = 0; attempt < 500 && codes.at(-1) !== "ECONNREFUSED"; attempt += 1) {
      codes.push(await probeOnce(port));
      if (codes.at(-1) !== "ECONNREFUSED") await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(codes.at(-1)).toBe("ECONNREFUSED");
  });

  it("a port another socket holds without sharing is told apart from a failure", async () => {
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(0, "127.0.0.1", resolve));
    const { port } = squatter.address() as { port: number };
    try {
      const executor = await open();
      await expect(executor.listen(port, () => undefined)).rejects.toThrow(
        /holds the forwarded port/,
      );
    } finally {
      squatter.close();
    }
  });
});

// The other way (`cordon port-forward`): the executor connects to a port where it runs.
describe("connections made by the executor", { timeout: 60_000 }, () => {
  let connection: ResidentConnection | undefined;
  afterEach(() => connection?.close());

  it("carries megabytes to a server where it runs and back, with half closes, several at once", async () => {
    connection = await ResidentConnection.open(localExecutor(binary), createSilentLogger());
    // A server that answers with the digest of all it read, once its client has shut down its side.
    const server = createServer({ allowHalfOpen: true }, (socket) => {
      const hash = createHash("sha256");
      socket.on("data", (chunk: Buffer) => hash.update(chunk));
      socket.on("end", () => socket.end(hash.digest("hex")));
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const { port } = server.address() as { port: number };
    try {
      const payloads = [randomBytes(5 * 1024 * 1024), randomBytes(1000), Buffer.alloc(0)];
      const replies = await Promise.all(
        payloads.map(async (payload) => {
          const channel = await (connection as ResidentConnection).connect(port);
          const chunks: Buffer[] = [];
          channel.on("data", (chunk: Buffer) => chunks.push(chunk));
          channel.end(payload);
          await once(channel, "end");
          return Buffer.concat(chunks).toString();
        }),
      );
      expect(replies).toEqual(
        payloads.map((payload) => createHash("sha256").update(payload).digest("hex")),
      );
    } finally {
      server.close();
    }
  });

  it("says nothing listens on a closed port, and goes on serving", async () => {
    connection = await ResidentConnection.open(localExecutor(binary), createSilentLogger());
    const closed = createServer();
    closed.listen(0, "127.0.0.1");
    await once(closed, "listening");
    const { port } = closed.address() as { port: number };
    closed.close();
    await expect(connection.connect(port)).rejects.toBeInstanceOf(PortClosedError);
    await expect(connection.connect(port)).rejects.toThrow(
      `nothing listens on port ${port} in local-executor (127.0.0.1)`,
    );
    expect(connection.alive).toBe(true);
    expect(await connection.fast(request.ping)).toBeDefined();
  });
});

/** What the other end sends before it closes; "" when the connection is reset instead. */
async function replyOf(socket: Socket): Promise<string> {
  const chunks: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => chunks.push(chunk));
  const reset = await new Promise<boolean>((resolve) => {
    socket.once("error", () => resolve(true));
    socket.once("close", () => resolve(false));
  });
  return reset ? "" : Buffer.concat(chunks).toString();
}

/** How one connection attempt to `port` ends: the error's code, or "connected". */
function probeOnce(port: number): Promise<string> {
  return new Promise((resolve) => {
    const probe = connect({ host: "127.0.0.1", port });
    probe.on("connect", () => {
      probe.destroy();
      resolve("connected");
    });
    probe.on("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "error"));
  });
}

/** Polls until `condition` holds; a loaded machine gets 10 s, a test never waits on a clock. */
async function waitFor(condition: () => boolean): Promise<void> {
  for (let attempt = 0; attempt < 1000 && !condition(); attempt += 1) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  expect(condition()).toBe(true);
}
