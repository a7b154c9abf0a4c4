import type { Socket } from "node:net";
import type { Duplex } from "node:stream";

import { SandboxError, sleep } from "../../../common/index.js";
import type {
  ContainerClient,
  ContainerDetails,
  ExecStatus,
  StartedExec,
} from "../client/index.js";
import { engineStatusOf, toSandboxError } from "../docker-errors.js";
import { DemuxStream } from "./demux-stream.js";
import {
  runCollected,
  type ExecRequest,
  type ExecTransport,
  type CommandRequest,
  type CommandResult,
  type RunningExec,
} from "../../shell/exec-transport.js";

export type { ExecRequest, RunningExec } from "../../shell/exec-transport.js";

/** Replaces a container that went away and returns the new container's id. */
export type ContainerRecovery = () => Promise<string>;

export interface ContainerExecOptions {
  recover?: ContainerRecovery | undefined;
  /** Why cordon stopped the container on purpose (its disk budget), if it did: the error to give. */
  stopReason?: (() => SandboxError | undefined) | undefined;
}

/** A start failure meaning the container is gone or stopped, not that the command failed. */
function isContainerGone(error: unknown): boolean {
  const status = engineStatusOf(error);
  return status === 404 || status === 409;
}

/**
 * The exec transport of one container, run as one user: one exec of the container client per
 * process, its output demultiplexed, its exit status read once the output has ended. The tools'
 * only way to start a process; the resident executor is started through it and falls back to it.
 */
export class ContainerExec implements ExecTransport {
  readonly #client: ContainerClient;
  readonly #recover: ContainerRecovery | undefined;
  readonly #stopReason: (() => SandboxError | undefined) | undefined;
  #containerId: string;

  constructor(
    client: ContainerClient,
    containerId: string,
    readonly containerName: string,
    readonly user: string,
    options: ContainerExecOptions = {},
  ) {
    this.#client = client;
    this.#recover = options.recover;
    this.#stopReason = options.stopReason;
    this.#containerId = containerId;
  }

  /** The current container's id (it changes when a dead container was replaced). */
  get containerId(): string {
    return this.#containerId;
  }

  async start(request: ExecRequest): Promise<RunningExec> {
    try {
      return await this.#start(request);
    } catch (error) {
      // The container died (killed, OOM, engine restart) before this command could start: get a
      // fresh one for the same sandbox (same name, same private workspace) and start it there.
      if (!this.#recover || !isContainerGone(error)) throw error;
      const replacement = await this.#recover();
      this.#containerId = replacement;
      return this.#start(request);
    }
  }

  async #start(request: ExecRequest): Promise<RunningExec> {
    const attachStdin = request.stdin !== undefined;
    let exec: StartedExec;
    try {
      exec = await this.#client.exec(this.#containerId, {
        cmd: request.cmd,
        user: this.user,
        workingDir: request.workingDir ?? "/",
        env: request.env ?? [],
        attachStdin,
      });
    } catch (error) {
      throw this.#failure(error, "start a command");
    }

    const socket: Duplex = exec.stream;
    let detached = false;
    const demux = new DemuxStream(request.onOutput);
    const streamEnded = new Promise<void>((resolve, reject) => {
      const fail = (error: unknown): void => {
        if (detached) resolve();
        else reject(this.#failure(error, "stream a command's output"));
      };
      socket.on("error", fail);
      demux.on("error", (error) => {
        socket.destroy();
        fail(error);
      });
      demux.on("finish", () => resolve());
      socket.on("close", () => {
        if (detached) resolve();
        // Closed without an end (the connection was cut): finish with what arrived; exec
        // inspect then says how the command ended, or that the engine is gone.
        else if (!demux.writableEnded) demux.end();
      });
      socket.pipe(demux);
    });
    if (attachStdin) void this.#feedStdin(socket, request.stdin);

    const exitCode = streamEnded.then(async () => {
      if (detached) return -1;
      return this.#exitCodeOf(exec);
    });
    // Callers may never await exitCode after detaching; keep that from being an unhandled rejection.
    exitCode.catch(() => undefined);
    return {
      exitCode,
      detach: () => {
        detached = true;
        socket.destroy();
      },
      keepAlive: (active) => {
        // A hijacked connection is a net.Socket (or a TLS socket over one).
        const handle = socket as Partial<Pick<Socket, "ref" | "unref">>;
        if (active) handle.ref?.();
        else handle.unref?.();
      },
    };
  }

  run(request: CommandRequest, signal?: AbortSignal): Promise<CommandResult> {
    return runCollected((full) => this.start(full), request, signal);
  }

  async #feedStdin(socket: Duplex, stdin: ExecRequest["stdin"]): Promise<void> {
    try {
      if (stdin instanceof Uint8Array) {
        if (stdin.byteLength > 0) socket.write(stdin);
      } else if (stdin) {
        for await (const chunk of stdin) {
          if (socket.destroyed) return;
          if (!socket.write(chunk)) {
            await new Promise<void>((resolve) => {
              const done = (): void => {
                socket.off("drain", done);
                socket.off("close", done);
                resolve();
              };
              socket.on("drain", done);
              socket.on("close", done);
            });
          }
        }
      }
      // Half-close: the engine turns it into end-of-file on the process's stdin.
      if (!socket.destroyed) socket.end();
    } catch {
      // The process stopped reading (it exited, or failed early); its exit status says why.
      if (!socket.destroyed) socket.end();
    }
  }

  async #exitCodeOf(exec: StartedExec): Promise<number> {
    // The output can end a moment before the engine records the exit.
    for (let attempt = 0; attempt < 200; attempt++) {
      let info: ExecStatus;
      try {
        info = await exec.status();
      } catch (error) {
        throw this.#failure(error, "read a command's exit status");
      }
      if (!info.running && info.exitCode !== null) return info.exitCode;
      if (!info.running) break;
      await sleep(attempt < 20 ? 5 : 25);
    }
    throw await this.#containerGone("read a command's exit status");
  }

  /** The clearest error for a failure: a stopped or missing container says so. */
  #failure(error: unknown, action: string): SandboxError {
    const status = engineStatusOf(error);
    if (status === 404 || status === 409) return this.#notRunning(action, error);
    // The engine's own error, named by this sandbox rather than the container's id.
    const engineError =
      error instanceof SandboxError && error.cause !== undefined ? error.cause : error;
    return toSandboxError(engineError, `${action} in ${this.containerName}`);
  }

  #notRunning(action: string, cause?: unknown): SandboxError {
    return new SandboxError(
      `the sandbox container ${this.containerName} is gone or not running (while trying to ${action})`,
      {
        cause,
        fix: "run the command again: the next call starts a fresh sandbox; `cordon sandbox list` shows its state",
      },
    );
  }

  /**
   * Throws the "container stopped" error when the container is not running, waiting up to
   * `settleMs` for a container that is being killed to say so (a killed container's processes
   * die a moment before the engine records the stop).
   */
  async assertRunning(action: string, settleMs = 0): Promise<void> {
    const deadline = performance.now() + settleMs;
    for (;;) {
      let container: ContainerDetails | undefined;
      try {
        container = await this.#client.inspect(this.#containerId);
      } catch (error) {
        throw this.#failure(error, action);
      }
      if (!container) throw this.#notRunning(action);
      if (!container.state.running) throw await this.#containerGone(action);
      if (performance.now() >= deadline) return;
      await sleep(50);
    }
  }

  async #containerGone(action: string): Promise<SandboxError> {
    const stoppedOnPurpose = this.#stopReason?.();
    if (stoppedOnPurpose) return stoppedOnPurpose;
    let state: string;
    try {
      state = (await this.#client.inspect(this.#containerId))?.state.status ?? "removed";
    } catch (error) {
      return toSandboxError(error, action);
    }
    return new SandboxError(
      `the sandbox container ${this.containerName} stopped while running a command (state: ${state})`,
      {
        fix: "run the command again: the next call starts a fresh sandbox; `cordon sandbox list` shows its state",
      },
    );
  }
}
