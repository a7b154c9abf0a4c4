import { SandboxError, type Logger } from "../../../common/index.js";
import type { OutputHandler } from "../exec/demux-stream.js";
import {
  HeldStdin,
  type ExecRequest,
  type ExecTransport,
  type RunningExec,
} from "../../shell/exec-transport.js";
import { ForwardedChannel } from "./forwarded-channel.js";
import {
  channelIdBit,
  cStrings,
  frameParts,
  FrameReader,
  payloadOf,
  portInUse,
  protocolGreeting,
  request,
  response,
  u32,
  type Frame,
} from "./protocol.js";
import { parseQuiet, type SandboxQuiet } from "../sandbox-quiet.js";

/** Where the executor binary is mounted (read-only) in a container created with `executor: "resident"`. */
export const executorContainerPath = "/.cordon/executor";

/** How long a starting executor may take to greet before cordon gives up on it. */
const helloTimeoutMs = 15_000;
/**
 * While calls wait, the executor is pinged this often; when nothing at all has come from it for
 * `unresponsiveAfterMs` with a ping outstanding, it is taken for stopped (a process of the same
 * uid can SIGSTOP it) and killed, so no call hangs on it.
 */
const pingEveryMs = 1_000;
const unresponsiveAfterMs = 8_000;
/** Stdin is sent in frames of at most this size, so the executor never holds one huge frame. */
const stdinFrameBytes = 1024 * 1024;
/** The output of a call that has none. */
const empty = Buffer.alloc(0);

/**
 * A forwarded port another socket in the sandbox holds: another cordon process attached to the
 * sandbox where the kernel does not share ports (gVisor), or a process of the sandbox's own.
 */
export class PortInUseError extends SandboxError {}

/** A process's call cut off because the executor itself stopped (not the process). */
export class ExecutorStoppedError extends SandboxError {}

/**
 * A multi-slot queue of frames for the executor's stdin (the exec stream applies backpressure).
 * A frame is its pieces (header, payload parts: a large write is not copied into one buffer);
 * they go out back to back, so a ping put first never lands inside another frame.
 */
class FrameQueue implements AsyncIterable<Uint8Array> {
  #frames: Uint8Array[][] = [];
  #closed = false;
  #wake: (() => void) | undefined;

  push(frame: Uint8Array[]): void {
    if (this.#closed) return;
    this.#frames.push(frame);
    this.#wake?.();
  }

  /** Ahead of every queued frame: a ping must not wait behind a large upload. */
  pushFirst(frame: Uint8Array[]): void {
    if (this.#closed) return;
    this.#frames.unshift(frame);
    this.#wake?.();
  }

  close(): void {
    this.#closed = true;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    for (;;) {
      const frame = this.#frames.shift();
      if (frame) {
        yield* frame;
        continue;
      }
      if (this.#closed) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }
}

/** A process started through the executor. */
interface ProcessCall {
  kind: "process";
  onOutput: OutputHandler;
  /** The executor could not fork (the pids limit is full): start it by plain exec instead. */
  fallBack: () => void;
  /** Output handlers run in order; the exit is reported after the last of them. */
  chain: Promise<void>;
  resolve: (status: number) => void;
  reject: (error: unknown) => void;
}

/** A fast file operation: its output collected whole. */
interface FastCall {
  kind: "fast";
  stdout: Buffer[];
  stderr: Buffer[];
  resolve: (result: FastResult | undefined) => void;
}

/** A listen request waiting for the executor's answer. */
interface ListenCall {
  kind: "listen";
  destination: ChannelDestination;
  resolve: (port: number) => void;
  reject: (error: Error) => void;
}

/** A connect request (`cordon port-forward`) waiting for its channel. */
interface ConnectCall {
  kind: "connect";
  port: number;
  resolve: (channel: ForwardedChannel) => void;
  reject: (error: Error) => void;
}

/** Nothing listens on the port in the sandbox (the executor's connect was refused). */
export class PortClosedError extends SandboxError {}

/**
 * Where the connections accepted on one forwarded port go: cordon's choice, made when it asked
 * for the listener. It takes the channel over (pipes it somewhere, or destroys it).
 */
export type ChannelDestination = (channel: ForwardedChannel) => void;

/** A port the executor listens on in the sandbox for cordon. */
export interface ForwardedPort {
  /** The listener's id (its channels are announced with it). */
  id: number;
  /** The port bound on 127.0.0.1 in the sandbox. */
  port: number;
}

export interface FastResult {
  status: number;
  stdout: Buffer;
  stderr: Buffer;
}

/**
 * One running resident executor: started with one attached exec (through `exec`, the Docker exec
 * transport), greeted, then used for any number of calls at once, each under its own id. When it
 * stops (killed from inside the sandbox, the container gone), its pending processes fail and its
 * pending fast operations answer "unhandled", so the caller redoes them by plain exec.
 */
export class ResidentConnection {
  readonly #frames = new FrameQueue();
  readonly #reader = new FrameReader();
  readonly #calls = new Map<number, ProcessCall | FastCall | ListenCall | ConnectCall>();
  /** Forwarded ports by listener id: the one place a channel's destination is looked up. */
  readonly #listeners = new Map<number, ChannelDestination>();
  readonly #channels = new Map<number, ForwardedChannel>();
  readonly #logger: Logger;
  readonly #exec: ExecTransport;
  #running: RunningExec | undefined;
  #nextId = 1;
  #alive = true;
  #greeted: ((greeting: string) => void) | undefined;
  /** The executor's pid in the container (the greeting's id). */
  #pid = 0;
  #heartbeat: NodeJS.Timeout | undefined;
  #lastHeardAt = 0;
  #pingOutstanding = false;
  /** Frames sent, pings and `quiet` questions aside (`SandboxQuiet.requests`). */
  #requests = 0;
  #onStopped: (() => void) | undefined;

  private constructor(exec: ExecTransport, logger: Logger) {
    this.#exec = exec;
    this.#logger = logger;
  }

  /** Starts the executor in the container and waits for its greeting. */
  static async open(exec: ExecTransport, logger: Logger): Promise<ResidentConnection> {
    const connection = new ResidentConnection(exec, logger);
    await connection.#start();
    return connection;
  }

  /** Pings while calls wait; one that stays unanswered means a stopped executor: kill it. */
  #beat(): void {
    if (!this.#alive) return;
    if (!this.#pingOutstanding) {
      this.#pingOutstanding = true;
      this.#frames.pushFirst(frameParts(request.ping, 0));
      return;
    }
    if (performance.now() - this.#lastHeardAt < unresponsiveAfterMs) return;
    this.#logger.warn(
      { pid: this.#pid },
      "the resident executor stopped answering (stopped from inside the sandbox?); killing it",
    );
    // By plain exec, as the sandbox user: SIGKILL ends a stopped process too.
    void this.#exec
      .run({ cmd: ["kill", "-KILL", String(this.#pid)] })
      .catch(() => undefined)
      .finally(() => this.close());
    this.#died("it stopped answering");
  }

  get alive(): boolean {
    return this.#alive;
  }

  /** Called once when the executor stops (or at once if it has). */
  onStopped(listener: () => void): void {
    if (!this.#alive) listener();
    else this.#onStopped = listener;
  }

  async #start(): Promise<void> {
    const greeting = new Promise<string>((resolve) => (this.#greeted = resolve));
    const running = await this.#exec.start({
      cmd: [executorContainerPath],
      stdin: this.#frames,
      onOutput: (stream, chunk) => {
        if (stream === "stdout") this.#receive(chunk);
        else this.#logger.debug({ stderr: Buffer.from(chunk).toString("utf8") }, "executor says");
      },
    });
    this.#running = running;
    let timer: NodeJS.Timeout | undefined;
    const ended = running.exitCode.then(
      (status) => `it exited with status ${status}`,
      (error: unknown) => `its stream failed: ${String(error)}`,
    );
    void ended.then((why) => this.#died(why));
    const outcome = await Promise.race([
      greeting,
      ended.then((why) => `stopped before greeting (${why})`),
      new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve("no greeting in time"), helloTimeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (outcome !== protocolGreeting) {
      this.close();
      // Another version's greeting: a binary built from another executor.c than this cordon's.
      const stale = outcome.startsWith(protocolGreeting.replace(/\d+$/, ""))
        ? ` (it speaks "${outcome}", this cordon "${protocolGreeting}": the binary is stale; rebuild it with \`npm run build\` or scripts/build-executor.sh)`
        : `: ${outcome}`;
      throw new SandboxError(`the resident executor did not start${stale}`);
    }
    running.keepAlive(false);
  }

  /**
   * Starts a process; stdin, if any, is whole bytes (streams go by plain exec). A `wrapped` call
   * (the exec wrapper's `run` mode) is run by the executor itself, without the wrapper's bash.
   * `fallback` starts it by plain exec when the executor cannot fork.
   */
  spawn(exec: ExecRequest, fallback: () => Promise<RunningExec>): RunningExec {
    const id = this.#newId();
    const attach = exec.stdin instanceof Uint8Array || exec.stdin instanceof HeldStdin;
    const env = exec.env ?? [];
    let resolveExit!: (status: number) => void;
    let rejectExit!: (error: unknown) => void;
    const exitCode = new Promise<number>((resolve, reject) => {
      resolveExit = resolve;
      rejectExit = reject;
    });
    exitCode.catch(() => undefined);
    let done = false;
    let replacement: RunningExec | undefined;
    const call: ProcessCall = {
      kind: "process",
      onOutput: exec.onOutput,
      fallBack: () => {
        this.#forget(id);
        fallback().then(
          (running) => {
            replacement = running;
            if (done) running.detach();
            running.exitCode.then(resolveExit, rejectExit);
          },
          (error: unknown) => {
            done = true;
            rejectExit(error);
          },
        );
      },
      chain: Promise.resolve(),
      resolve: (status) => {
        done = true;
        this.#forget(id);
        resolveExit(status);
      },
      reject: (error) => {
        done = true;
        this.#forget(id);
        rejectExit(error);
      },
    };
    this.#track(id, call);
    const { wrapped } = exec;
    if (wrapped) {
      // The wrapper's work done by the executor itself: neither `cmd` nor `env` (the wrapper's
      // program) is sent; the command carries its own environment (commandWithEnv).
      this.#send(
        request.run,
        id,
        u32(attach ? 1 : 0),
        cStrings(wrapped.id, wrapped.cwd, wrapped.root, wrapped.stateDirectory, wrapped.command),
      );
    } else {
      this.#send(
        request.spawn,
        id,
        u32(attach ? 1 : 0),
        u32(exec.cmd.length),
        u32(env.length),
        cStrings(...exec.cmd, ...env, exec.workingDir ?? "/"),
      );
    }
    const sendStdin = (bytes: Uint8Array): void => {
      for (let at = 0; at < bytes.byteLength; at += stdinFrameBytes) {
        this.#send(request.stdin, id, bytes.subarray(at, at + stdinFrameBytes));
      }
    };
    if (exec.stdin instanceof Uint8Array) {
      sendStdin(exec.stdin);
      this.#send(request.stdin, id);
    } else if (exec.stdin instanceof HeldStdin) {
      sendStdin(exec.stdin.first);
      // The rest, then end-of-file; nothing once the call has ended (or fell back to an exec,
      // which streams the whole of it itself).
      const end = (rest: Uint8Array | undefined): void => {
        if (done || this.#calls.get(id) !== call) return;
        if (rest) sendStdin(rest);
        this.#send(request.stdin, id);
      };
      exec.stdin.rest.then(end, () => end(undefined));
    }
    return {
      exitCode,
      detach: () => {
        if (replacement) {
          replacement.detach();
          return;
        }
        if (done) return;
        this.#send(request.detach, id);
        call.resolve(-1);
      },
      // The executor's own connection is what holds the process; see #track.
      keepAlive: () => undefined,
    };
  }

  /** A fast file operation; undefined when the executor did not handle it (or stopped). */
  fast(type: string, ...payload: Uint8Array[]): Promise<FastResult | undefined> {
    if (!this.#alive) return Promise.resolve(undefined);
    const id = this.#newId();
    return new Promise((resolve) => {
      this.#track(id, {
        kind: "fast",
        stdout: [],
        stderr: [],
        resolve: (result) => {
          this.#forget(id);
          resolve(result);
        },
      });
      this.#send(type, id, ...payload);
    });
  }

  /** See `SandboxQuiet`; undefined when the executor did not say (or stopped). */
  async quiet(): Promise<SandboxQuiet | undefined> {
    const local = { pending: this.#calls.size, requests: this.#requests };
    const result = await this.fast(request.quiet);
    if (result?.status !== 0) return undefined;
    return parseQuiet(result.stdout.toString("latin1"), local);
  }

  /**
   * Listens on 127.0.0.1:`port` inside the sandbox (0: a free port), and hands every connection
   * accepted there to `destination` as a channel. The listener lives as long as this executor.
   */
  listen(port: number, destination: ChannelDestination): Promise<ForwardedPort> {
    const id = this.#newId();
    return new Promise<number>((resolve, reject) => {
      this.#track(id, {
        kind: "listen",
        destination,
        resolve: (bound) => {
          this.#forget(id);
          this.#listeners.set(id, destination);
          resolve(bound);
        },
        reject: (error) => {
          this.#forget(id);
          reject(error);
        },
      });
      this.#send(request.listen, id, u32(port));
    }).then((bound) => ({ id, port: bound }));
  }

  /**
   * A connection to 127.0.0.1:`port` inside the sandbox, made by the executor there, as a channel
   * (`cordon port-forward`). Fails with `PortClosedError` when nothing listens there.
   */
  connect(port: number): Promise<ForwardedChannel> {
    const id = this.#newId();
    return new Promise<ForwardedChannel>((resolve, reject) => {
      this.#track(id, {
        kind: "connect",
        port,
        resolve: (channel) => {
          this.#forget(id);
          resolve(channel);
        },
        reject: (error) => {
          this.#forget(id);
          reject(error);
        },
      });
      this.#send(request.connect, id, u32(port));
    });
  }

  /**
   * Stops a listener; the channels it opened go on until they end. Not acknowledged: a connection
   * the sandbox's kernel gave this listener's socket just before it closes is reset there.
   */
  unlisten(id: number): void {
    if (!this.#listeners.delete(id) || !this.#alive) return;
    this.#send(request.unlisten, id);
  }

  /** Stops the executor's stream (the executor exits at end of its stdin). */
  close(): void {
    this.#frames.close();
    this.#running?.detach();
    this.#died("closed by cordon");
  }

  #newId(): number {
    const id = this.#nextId;
    // Below channelIdBit: the executor's channel ids are the other half.
    this.#nextId = this.#nextId >= channelIdBit - 16 ? 1 : this.#nextId + 1;
    return id;
  }

  #track(id: number, call: ProcessCall | FastCall | ListenCall | ConnectCall): void {
    if (!this.#alive) {
      if (call.kind === "fast") call.resolve(undefined);
      else call.reject(this.#stoppedError());
      return;
    }
    // The connection keeps cordon's process alive only while a call waits on it.
    if (this.#calls.size === 0) {
      this.#running?.keepAlive(true);
      this.#lastHeardAt = performance.now();
      this.#pingOutstanding = false;
      this.#heartbeat = setInterval(() => this.#beat(), pingEveryMs);
      this.#heartbeat.unref();
    }
    this.#calls.set(id, call);
  }

  #forget(id: number): void {
    if (!this.#calls.delete(id)) return;
    if (this.#calls.size === 0) {
      this.#running?.keepAlive(false);
      clearInterval(this.#heartbeat);
    }
  }

  #send(type: string, id: number, ...payload: Uint8Array[]): void {
    if (type !== request.ping && type !== request.quiet) this.#requests += 1;
    this.#frames.push(frameParts(type, id, ...payload));
  }

  #receive(chunk: Uint8Array): void {
    this.#lastHeardAt = performance.now();
    for (const frame of this.#reader.push(chunk)) this.#dispatch(frame);
  }

  #dispatch(frame: Frame): void {
    if (frame.type === response.hello) {
      this.#pid = frame.id;
      this.#greeted?.(payloadOf(frame).toString("utf8"));
      return;
    }
    if (frame.type === response.pong) {
      this.#pingOutstanding = false;
      // A ping sent as a call (`fast(request.ping)`, the bench's round trip); the heartbeat's is 0.
      const call = this.#calls.get(frame.id);
      if (call?.kind === "fast") call.resolve({ status: 0, stdout: empty, stderr: empty });
      return;
    }
    if (frame.id >= channelIdBit) {
      this.#channelFrame(frame);
      return;
    }
    const call = this.#calls.get(frame.id);
    if (!call) return;
    const { parts } = frame;
    if (call.kind === "connect") {
      // Its success comes as a channel open (#channelFrame); anything here is a failure.
      const reason = payloadOf(frame).toString("utf8") || "refused";
      call.reject(
        /refused/i.test(reason)
          ? new PortClosedError(
              `nothing listens on port ${call.port} in ${this.#exec.containerName} (127.0.0.1)`,
              {
                fix: "start the server in the sandbox first, listening on 127.0.0.1 or 0.0.0.0 at that port (`cordon exec` … `ss -ltn` shows what listens)",
              },
            )
          : new SandboxError(
              `cannot connect to port ${call.port} in ${this.#exec.containerName}: ${reason}`,
            ),
      );
      return;
    }
    if (call.kind === "listen") {
      const reason = payloadOf(frame).toString("utf8");
      if (frame.type === response.exit) call.resolve(payloadOf(frame).readInt32BE(0));
      else if (reason === portInUse) {
        call.reject(
          new PortInUseError(`a socket in ${this.#exec.containerName} holds the forwarded port`),
        );
      } else {
        call.reject(
          new SandboxError(
            `cannot forward a port into ${this.#exec.containerName}: ${reason || "refused"}`,
            {
              fix: "a process in the sandbox may hold the port; restart the sandbox (cordon sandbox stop)",
            },
          ),
        );
      }
      return;
    }
    if (call.kind === "fast") {
      if (frame.type === response.stdout) call.stdout.push(...parts);
      else if (frame.type === response.stderr) call.stderr.push(...parts);
      else if (frame.type === response.exit) {
        call.resolve({
          status: payloadOf(frame).readInt32BE(0),
          stdout: joined(call.stdout),
          stderr: joined(call.stderr),
        });
      } else call.resolve(undefined);
      return;
    }
    if (frame.type === response.stdout || frame.type === response.stderr) {
      const stream = frame.type === response.stdout ? "stdout" : "stderr";
      call.chain = call.chain.then(async () => {
        for (const part of parts) await call.onOutput(stream, part);
        this.#send(request.ack, frame.id, u32(frame.length));
      });
      // A handler that throws ends the call, as a broken exec stream would.
      call.chain.catch((error: unknown) => {
        this.#send(request.detach, frame.id);
        call.reject(error);
      });
    } else if (frame.type === response.exit) {
      const status = payloadOf(frame).readInt32BE(0);
      void call.chain.then(() => call.resolve(status));
    } else if (frame.type === response.unhandled) {
      call.fallBack();
    } else if (frame.type === response.failed) {
      call.reject(
        new SandboxError(
          `cannot start a command in ${this.#exec.containerName}: ${payloadOf(frame).toString("utf8")}`,
        ),
      );
    }
  }

  /**
   * A frame of a channel. A new channel's destination is the one its listener was given by
   * cordon, or the connect request that asked for it; the sandbox names only the id, and an id
   * cordon never gave (or a connect already answered) is refused.
   */
  #channelFrame(frame: Frame): void {
    if (frame.type === response.channelOpen) {
      const owner = frame.length === 4 ? payloadOf(frame).readUInt32BE(0) : 0;
      const connect = this.#calls.get(owner);
      const destination =
        connect?.kind === "connect"
          ? (channel: ForwardedChannel) => connect.resolve(channel)
          : this.#listeners.get(owner);
      if (!destination || this.#channels.has(frame.id)) {
        this.#send(request.channelReset, frame.id);
        return;
      }
      const channel = new ForwardedChannel(frame.id, (type, id, ...payload) =>
        this.#send(type, id, ...payload),
      );
      this.#channels.set(frame.id, channel);
      channel.once("close", () => this.#channels.delete(frame.id));
      destination(channel);
      return;
    }
    const channel = this.#channels.get(frame.id);
    if (!channel) return;
    if (frame.type === response.channelData) channel.receive(frame.parts, frame.length);
    else if (frame.type === response.channelAck && frame.length === 4)
      channel.acknowledged(payloadOf(frame).readUInt32BE(0));
    else if (frame.type === response.channelEnd) channel.receivedEnd();
    else if (frame.type === response.channelReset)
      channel.reset("the connection in the sandbox was reset");
  }

  #died(why: string): void {
    if (!this.#alive) return;
    this.#alive = false;
    this.#onStopped?.();
    clearInterval(this.#heartbeat);
    this.#frames.close();
    this.#logger.debug({ why }, "resident executor stopped");
    // Its listeners died with it: the sandbox's forwarded ports are gone until a new one listens.
    this.#listeners.clear();
    for (const channel of [...this.#channels.values()])
      channel.reset(`the executor stopped: ${why}`);
    this.#channels.clear();
    const calls = [...this.#calls.values()];
    this.#calls.clear();
    for (const call of calls) {
      if (call.kind === "fast") {
        call.resolve(undefined);
        continue;
      }
      if (call.kind === "listen" || call.kind === "connect") {
        call.reject(this.#stoppedError());
        continue;
      }
      const fail = (): void => call.reject(this.#stoppedError());
      void call.chain.then(fail, fail);
    }
  }

  #stoppedError(): ExecutorStoppedError {
    return new ExecutorStoppedError(
      `the resident executor of ${this.#exec.containerName} stopped while a command was running`,
      {
        fix: "run the command again: cordon starts a new executor (a process in the sandbox may have killed it)",
      },
    );
  }
}

/**
 * Pieces as one buffer of its own: the one copy a fast read makes (a view would keep the socket
 * chunk it came in alive with the result).
 */
function joined(parts: Buffer[]): Buffer {
  return Buffer.concat(parts);
}
