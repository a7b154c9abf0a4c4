import { throwIfAborted, type Logger } from "../../../common/index.js";
import type { ContainerExec } from "../exec/container-exec.js";
import {
  runCollected,
  type ExecRequest,
  type ExecTransport,
  type FastFileOperations,
  type RunRequest,
  type RunResult,
  type RunningExec,
} from "../../shell/exec-transport.js";
import { cStrings, request, u32, u64 } from "./protocol.js";
import { ExecutorStoppedError, ResidentConnection } from "./resident-connection.js";

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

  constructor(exec: ContainerExec, logger: Logger) {
    this.#exec = exec;
    this.#logger = logger;
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

  get containerName(): string {
    return this.#exec.containerName;
  }

  /** Starts the executor now rather than at the first call. */
  warmUp(): void {
    void this.#ready();
  }

  async start(exec: ExecRequest): Promise<RunningExec> {
    const streamsStdin = exec.stdin !== undefined && !(exec.stdin instanceof Uint8Array);
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

  run(exec: RunRequest, signal?: AbortSignal): Promise<RunResult> {
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
  #ready(): Promise<ResidentConnection | undefined> {
    const key = `${this.#exec.containerId}\0${this.#exec.user}`;
    const live = connections.get(key);
    if (live?.alive) {
      this.#hadConnection = true;
      return Promise.resolve(live);
    }
    if (live) connections.delete(key);
    const inFlight = openings.get(key);
    if (inFlight) return inFlight;
    if (this.#failedStarts >= maxFailedStarts) return Promise.resolve(undefined);
    const first = !this.#hadConnection && this.#failedStarts === 0;
    if (this.#hadConnection) this.#logger.debug("resident executor stopped; starting a new one");
    const opening = ResidentConnection.open(this.#exec, this.#logger).then(
      (connection) => {
        this.#failedStarts = 0;
        this.#hadConnection = true;
        connections.set(key, connection);
        connection.onStopped(() => {
          if (connections.get(key) === connection) connections.delete(key);
        });
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
    return first ? opening : Promise.resolve(undefined);
  }
}
