import { SandboxError, throwIfAborted, type Logger } from "../../../common/index.js";
import type { ContainerExec } from "../exec/container-exec.js";
import {
  HeldStdin,
  runCollected,
  type ExecRequest,
  type ExecTransport,
  type FastFileOperations,
  type CommandRequest,
  type CommandResult,
  type RunningExec,
} from "../../shell/exec-transport.js";
import { cStrings, request, u32, u64 } from "./protocol.js";
import type { SandboxQuiet } from "../sandbox-quiet.js";
import type { ForwardedChannel } from "./forwarded-channel.js";
import {
  ExecutorStoppedError,
  PortInUseError,
  ResidentConnection,
  type ChannelDestination,
} from "./resident-connection.js";

/**
 * A port forwarded into the sandbox: 127.0.0.1:`port` there, each connection handed to
 * `destination` on cordon's side (docs/network.md, "No route out").
 */
export interface PortForward {
  /** The port in the sandbox; 0 = a free one, fixed by the first listen and kept after. */
  port: number;
  destination: ChannelDestination;
}

/** A forward made by `ResidentTransport.forward`; `close()` stops it (idempotent). */
export interface OpenForward {
  /** The port listened on, 127.0.0.1 in the sandbox. */
  port: number;
  close(): void;
}

/** One forward of a transport and its listener on the live executor, if any. */
interface ForwardState extends PortForward {
  listening?: { connection: ResidentConnection; id: number } | undefined;
}

/** Starts that fail in a row (not kills: a binary that is missing or refuses) before giving up. */
const maxFailedStarts = 3;
/**
 * Larger writes go through the file script (in 1 MiB stdin frames) rather than one frame, so no
 * frame holds the stream (and the executor's heartbeat) for long.
 */
const maxFastWriteBytes = 16 * 1024 * 1024;

/**
 * The live executors of this process, one per container and user: every sandbox object over the
 * same container (a new lease per run in a long-lived process) shares it, rather than leaving one
 * more executor in the container each time.
 */
const connections = new Map<string, ResidentConnection>();
const openings = new Map<string, Promise<ResidentConnection | undefined>>();

/**
 * The exec transport of a container with a resident executor: commands and file scripts start
 * over the executor's open stream instead of one Docker exec each, and read, write and stat take
 * the executor's fast paths. Whatever the executor cannot do goes by plain exec (`exec`): stdin
 * streams (tree copies, output logs), and every call while no executor runs. An executor that
 * stopped (the agent can kill it: same uid) is replaced beside the call that found it gone.
 */
export class ResidentTransport implements ExecTransport {
  readonly fastFiles: FastFileOperations;
  readonly #exec: ContainerExec;
  readonly #logger: Logger;
  /** Whether an executor ever ran for this transport (later starts do not hold up a call). */
  #hadConnection = false;
  #failedStarts = 0;
  /** What this transport forwards into the sandbox: listened on by every executor it starts. */
  readonly #forwards: ForwardState[];
  #listenQueue: Promise<void> = Promise.resolve();

  constructor(exec: ContainerExec, logger: Logger, forwards: readonly PortForward[] = []) {
    this.#exec = exec;
    this.#logger = logger;
    this.#forwards = forwards.map((forward) => ({ ...forward }));
    this.fastFiles = {
      read: async (path, maxBytes, signal) => {
        const result = await this.#fast(signal, request.read, u64(maxBytes), cStrings(path));
        return result?.status === 0 ? result.stdout : undefined;
      },
      write: async (path, data, mode, createParents, signal) => {
        if (data.byteLength > maxFastWriteBytes) return undefined;
        const target = Buffer.from(path, "utf8");
        const result = await this.#fast(
          signal,
          request.write,
          u32(mode),
          u32(createParents ? 1 : 0),
          u32(target.byteLength),
          target,
          data,
        );
        return result?.status === 0 ? true : undefined;
      },
      stat: async (path, signal) => {
        const result = await this.#fast(signal, request.stat, cStrings(path));
        return result?.status === 0 ? result.stdout.toString("utf8") : undefined;
      },
    };
  }

  /** The executor kills the trees of the commands it started itself (`ExecRequest.wrapped`). */
  async killWrapped(id: string): Promise<boolean> {
    const result = await this.#fast(undefined, request.kill, cStrings(id));
    return result?.status === 0;
  }

  /**
   * One frame to the executor and its answer, nothing started: the floor under every call (the
   * bench's executor round trip). False when no executor runs.
   */
  async ping(signal?: AbortSignal): Promise<boolean> {
    return (await this.#fast(signal, request.ping)) !== undefined;
  }

  /**
   * See `SandboxQuiet`. Asked of a live executor only: starting one would be a process, and a
   * sandbox without one is not known to be idle.
   */
  async quiet(): Promise<SandboxQuiet | undefined> {
    const live = connections.get(`${this.#exec.containerId}\0${this.#exec.user}`);
    return live?.alive ? live.quiet() : undefined;
  }

  get containerName(): string {
    return this.#exec.containerName;
  }

  /** Starts the executor now rather than at the first call. */
  warmUp(): void {
    void this.#ready();
  }

  /**
   * Starts the executor if it is not running and waits until every forward listens in the
   * sandbox; fails when they cannot (no executor binary, or a port the sandbox holds).
   */
  async openForwards(): Promise<void> {
    const connection = await this.#ready(true);
    if (!connection) throw this.#noExecutorError();
    await this.#listenAll(connection);
  }

  /**
   * A connection to 127.0.0.1:`port` in the sandbox, made there by the executor (`cordon
   * port-forward`): the sandbox keeps its network as it is.
   */
  async connect(port: number): Promise<ForwardedChannel> {
    const connection = await this.#ready(true);
    if (!connection) throw this.#noExecutorError();
    return connection.connect(port);
  }

  /** Forwards one more port, for as long as this transport lives or until `close()`. */
  async forward(forward: PortForward): Promise<OpenForward> {
    const state: ForwardState = { ...forward };
    this.#forwards.push(state);
    try {
      await this.openForwards();
    } catch (error) {
      this.#drop(state);
      throw error;
    }
    return { port: state.port, close: () => this.#drop(state) };
  }

  #drop(state: ForwardState): void {
    const at = this.#forwards.indexOf(state);
    if (at >= 0) this.#forwards.splice(at, 1);
    state.listening?.connection.unlisten(state.listening.id);
    state.listening = undefined;
  }

  /**
   * Every forward listening on `connection` (those already there are left as they are). One at a
   * time per transport, so two calls never listen twice for one forward.
   */
  #listenAll(connection: ResidentConnection): Promise<void> {
    const done = this.#listenQueue.then(() => this.#listenMissing(connection));
    this.#listenQueue = done.catch(() => undefined);
    return done;
  }

  async #listenMissing(connection: ResidentConnection): Promise<void> {
    await Promise.all(
      this.#forwards.map(async (state) => {
        if (state.listening?.connection === connection) return;
        let listening;
        try {
          listening = await connection.listen(state.port, state.destination);
        } catch (error) {
          if (!(error instanceof PortInUseError)) throw error;
          // Another cordon process attached to this sandbox forwards it (to the same proxy) where
          // ports cannot be shared, or the sandbox took it for itself: tried again at every call,
          // so this process takes over when the other lets go.
          this.#logger.debug({ port: state.port }, error.message);
          return;
        }
        // Dropped while it was being opened.
        if (!this.#forwards.includes(state)) return void connection.unlisten(listening.id);
        state.port = listening.port;
        state.listening = { connection, id: listening.id };
      }),
    );
  }

  #noExecutorError(): SandboxError {
    return new SandboxError(
      `cannot forward ports into ${this.#exec.containerName}: its resident executor does not run`,
      {
        fix: 'the egress proxy and the model gateway are reached through cordon\'s executor: build it (`npm run build` needs gcc) and keep sandbox.docker.executor "resident"',
      },
    );
  }
  async start(exec: ExecRequest): Promise<RunningExec> {
    const streamsStdin =
      exec.stdin !== undefined &&
      !(exec.stdin instanceof Uint8Array) &&
      !(exec.stdin instanceof HeldStdin);
    const connection = streamsStdin ? undefined : await this.#ready();
    if (!connection) return this.#exec.start(exec);
    const running = connection.spawn(exec, () => this.#exec.start(exec));
    // Cut off because the executor stopped: if the container itself went away, say that.
    const exitCode = running.exitCode.catch(async (error: unknown) => {
      if (error instanceof ExecutorStoppedError)
        await this.#exec.assertRunning("run a command", 1_000);
      throw error;
    });
    exitCode.catch(() => undefined);
    return { ...running, exitCode };
  }

  run(exec: CommandRequest, signal?: AbortSignal): Promise<CommandResult> {
    return runCollected((full) => this.start(full), exec, signal);
  }

  assertRunning(action: string, settleMs?: number): Promise<void> {
    return this.#exec.assertRunning(action, settleMs);
  }

  async #fast(signal: AbortSignal | undefined, type: string, ...payload: Uint8Array[]) {
    throwIfAborted(signal, "the sandbox operation");
    const connection = await this.#ready();
    const result = await connection?.fast(type, ...payload);
    throwIfAborted(signal, "the sandbox operation");
    return result;
  }

  /**
   * The live executor; undefined when there is none, and then a new one is started for the next
   * calls. The first call waits for the first start (it costs what one plain exec would).
   */
  #ready(wait = false): Promise<ResidentConnection | undefined> {
    const key = `${this.#exec.containerId}\0${this.#exec.user}`;
    const live = connections.get(key);
    if (live?.alive) {
      this.#hadConnection = true;
      return this.#withForwards(live);
    }
    if (live) connections.delete(key);
    const inFlight = openings.get(key);
    // Opened by another transport over the same container: this one's forwards are added.
    if (inFlight)
      return inFlight.then((connection) => connection && this.#withForwards(connection));
    if (this.#failedStarts >= maxFailedStarts) return Promise.resolve(undefined);
    const first = !this.#hadConnection && this.#failedStarts === 0;
    if (this.#hadConnection) this.#logger.debug("resident executor stopped; starting a new one");
    const opening = ResidentConnection.open(this.#exec, this.#logger).then(
      async (connection) => {
        this.#failedStarts = 0;
        this.#hadConnection = true;
        connections.set(key, connection);
        connection.onStopped(() => {
          if (connections.get(key) === connection) connections.delete(key);
        });
        // Before any call runs on it: a command that needs a forwarded port finds it listening.
        await this.#listenAll(connection).catch((error: unknown) =>
          this.#logger.warn({ err: error }, "cannot forward the sandbox's ports"),
        );
        return connection;
      },
      (error: unknown) => {
        this.#failedStarts += 1;
        const level = this.#failedStarts >= maxFailedStarts ? "warn" : "debug";
        this.#logger[level](
          { err: error, failedStarts: this.#failedStarts },
          "the resident executor did not start; commands go by plain exec",
        );
        return undefined;
      },
    );
    openings.set(
      key,
      opening.finally(() => openings.delete(key)),
    );
    // With forwards, the call waits for the new executor too: the command it runs may need them.
    return first || wait || this.#forwards.length > 0 ? opening : Promise.resolve(undefined);
  }

  /** `connection`, once this transport's forwards listen on it (a failure is logged). */
  async #withForwards(connection: ResidentConnection): Promise<ResidentConnection> {
    if (this.#forwards.every((state) => state.listening?.connection === connection)) {
      return connection;
    }
    await this.#listenAll(connection).catch((error: unknown) =>
      this.#logger.warn({ err: error }, "cannot forward the sandbox's ports"),
    );
    return connection;
  }
}
