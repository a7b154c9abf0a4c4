import { posix } from "node:path";
import { TextDecoder } from "node:util";

import { FileOperationError, type Logger } from "../../common/index.js";
import type {
  ExecOptions,
  ProcessInfo,
  ProcessOutput,
  ProcessTable,
  SignalOption,
} from "../sandbox.js";
import { commandWithEnv, interpretStatus, newRunId, scriptInvocation } from "./command-line.js";
import { throwIfRefused } from "./exec-wrapper.js";
import { shellScript } from "./shell-scripts.js";
import type { ScriptRunner } from "./script-runner.js";

export interface ScriptProcessTableOptions {
  runner: ScriptRunner;
  /** Where relative working directories resolve. */
  workdir: string;
  /** A working directory must resolve inside this ("/" in a container). */
  root: string;
  /** Holds one directory per process (inside the sandbox). */
  directory: string;
  /** Extra environment for every program (`NAME=value`), e.g. the host's scrubbed one. */
  env?: readonly string[] | undefined;
  logger: Logger;
}
/** Output a background process keeps; past it output is read and dropped. */
const maxProcessLogBytes = 16 * 1024 * 1024;
/** Bytes one poll or log returns at most (head and tail of it when there is more). */
const maxReadBytes = 1024 * 1024;
const processId = /^p-[0-9a-f]{12}$/;

/**
 * Background processes of a shell-backed sandbox. Everything lives in the sandbox (see
 * process-script.ts), so another sandbox object for the same container sees the same table; this
 * object only remembers, per process, a UTF-8 decoder so a character split between two polls is
 * not mangled.
 */
export class ScriptProcessTable implements ProcessTable {
  readonly #decoders = new Map<string, TextDecoder>();
  readonly #runner: ScriptRunner;
  readonly #options: ScriptProcessTableOptions;

  constructor(options: ScriptProcessTableOptions) {
    this.#runner = options.runner;
    this.#options = options;
  }

  async start(
    command: string,
    options: Omit<ExecOptions, "timeoutMs" | "stdin"> = {},
  ): Promise<ProcessInfo> {
    const id = newRunId("p-");
    const cwd = posix.resolve(this.#options.workdir, options.cwd ?? ".");
    const startedAt = new Date().toISOString();
    const result = await this.#runner.run(
      this.#invocation(shellScript("execWrapper"), [
        "spawn",
        id,
        cwd,
        this.#options.root,
        commandWithEnv(command, options.env),
        `${this.#options.directory}/${id}`,
        String(maxProcessLogBytes),
        startedAt,
        command,
      ]),
      options.signal,
    );
    const stderr = result.stderr.toString("utf8");
    if (result.exitCode !== 0) {
      throwIfRefused(id, cwd, stderr);
      throw new FileOperationError(
        `cannot start the background process: ${stderr.trim() || `exit status ${result.exitCode}`}`,
        "other",
        cwd,
      );
    }
    this.#options.logger.debug({ process: id, cwd }, "background process started");
    return { id, command, state: "running", exitCode: null, startedAt };
  }

  async list(options: SignalOption = {}): Promise<ProcessInfo[]> {
    const result = await this.#script(["list", this.#options.directory], options);
    const fields = result.stdout.toString("utf8").split("\0");
    const infos: ProcessInfo[] = [];
    for (let i = 0; i + 3 < fields.length; i += 4) {
      const [id = "", startedAt = "", status = "", command = ""] = fields.slice(i, i + 4);
      infos.push(infoOf(id, command, startedAt, status));
    }
    return infos.sort((a, b) => a.startedAt.localeCompare(b.startedAt) || a.id.localeCompare(b.id));
  }

  poll(id: string, options: SignalOption = {}): Promise<ProcessOutput> {
    return this.#read(id, "poll", options);
  }

  log(id: string, options: SignalOption = {}): Promise<ProcessOutput> {
    return this.#read(id, "log", options);
  }

  async write(id: string, data: string, options: SignalOption = {}): Promise<void> {
    this.#checkId(id);
    await this.#script(
      ["write", this.#options.directory, id],
      options,
      new TextEncoder().encode(data),
    );
  }

  async kill(id: string, options: SignalOption = {}): Promise<ProcessInfo> {
    this.#checkId(id);
    // Known id first, so an unknown one fails with not_found rather than silently killing nothing.
    const before = await this.#info(id, options);
    if (before.state === "running") {
      await this.#runner.run(
        this.#invocation(shellScript("execWrapper"), ["kill", id]),
        options.signal,
      );
      await this.#script(["wait", this.#options.directory, id], options);
    }
    this.#options.logger.debug({ process: id }, "background process killed");
    return this.#info(id, options);
  }

  async #info(id: string, options: SignalOption): Promise<ProcessInfo> {
    const info = (await this.list(options)).find((candidate) => candidate.id === id);
    if (!info) throw unknownProcess(id);
    return info;
  }

  async #read(id: string, mode: "poll" | "log", options: SignalOption): Promise<ProcessOutput> {
    this.#checkId(id);
    const result = await this.#script(
      ["read", this.#options.directory, id, mode, String(maxReadBytes)],
      options,
    );
    const header: string[] = [];
    let offset = 0;
    while (header.length < 6) {
      const end = result.stdout.indexOf(0, offset);
      if (end < 0) break;
      header.push(result.stdout.subarray(offset, end).toString("utf8"));
      offset = end + 1;
    }
    const [status = "", , , skipped = "0", startedAt = "", command = ""] = header;
    const bytes = result.stdout.subarray(offset);
    const state = infoOf(id, command, startedAt, status);
    let output: string;
    const dropped = Number(skipped);
    if (mode === "log" || dropped > 0) {
      // Not a continuation of the previous poll: decode on its own.
      this.#decoders.delete(id);
      const half = Math.floor(bytes.byteLength / 2);
      output =
        dropped > 0
          ? `${decode(bytes.subarray(0, half))}\n[… ${dropped} bytes omitted …]\n${decode(bytes.subarray(half))}`
          : decode(bytes);
    } else {
      let decoder = this.#decoders.get(id);
      if (!decoder) {
        decoder = new TextDecoder();
        this.#decoders.set(id, decoder);
      }
      output = decoder.decode(bytes, { stream: state.state === "running" });
    }
    return { info: state, output };
  }

  async #script(
    args: string[],
    options: SignalOption,
    stdin?: Uint8Array,
  ): Promise<{ stdout: Buffer }> {
    const result = await this.#runner.run(
      { ...this.#invocation(shellScript("processTable"), args), stdin },
      options.signal,
    );
    if (result.exitCode !== 0) {
      const stderr = result.stderr.toString("utf8").trim();
      const id = args[2] ?? "";
      if (stderr.includes("cordon-file-error:not_found:")) throw unknownProcess(id);
      const named = /cordon-file-error:\w+:(.*)/.exec(stderr);
      throw new FileOperationError(
        named?.[1] ?? `the process operation failed: ${stderr || `exit status ${result.exitCode}`}`,
        "other",
        id,
      );
    }
    return result;
  }

  /** A program with the table's environment; messages in the C locale, whatever the image sets. */
  #invocation(script: string, args: string[]): { cmd: string[]; env: string[] } {
    const invocation = scriptInvocation(script, args);
    return {
      cmd: invocation.cmd,
      env: [...(this.#options.env ?? []), ...invocation.env, "LC_ALL=C"],
    };
  }

  #checkId(id: string): void {
    if (!processId.test(id)) throw unknownProcess(id);
  }
}

function unknownProcess(id: string): FileOperationError {
  return new FileOperationError(
    `no background process with id ${JSON.stringify(id)}`,
    "not_found",
    id,
    { fix: "list the background processes to see their ids" },
  );
}

function infoOf(id: string, command: string, startedAt: string, status: string): ProcessInfo {
  if (status === "running") return { id, command, state: "running", exitCode: null, startedAt };
  const code = status === "lost" ? null : interpretStatus(Number(status)).exitCode;
  return { id, command, state: "exited", exitCode: code, startedAt };
}

function decode(bytes: Uint8Array): string {
  return new TextDecoder().decode(bytes);
}
