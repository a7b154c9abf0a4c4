import { execFile, spawn, type ChildProcessByStdio } from "node:child_process";
import type { Readable, Writable } from "node:stream";

/**
 * The one way cordon runs git on the host, and only over trees no agent has written: the user's own
 * repository (listing its files to seed a copy) and a seed being built, before any container can
 * reach it (recording its baseline). A private copy an agent wrote is never read here: the
 * inspector (sandbox/docker/inspector/) reads it in a throwaway container (DESIGN.md §10). Still,
 * a repository is hostile data, so git never reads its configuration: the caller names the git
 * dir (one cordon wrote) and the work tree, and these overrides close the ways git runs code —
 * hooks (`core.hooksPath`), the fsmonitor hook and, with the system config skipped, filters and
 * textconv drivers. `safe.directory=*` because the trees belong to the user or the container's
 * user, never to this process.
 */
const closedConfig = [
  "-c",
  "core.hooksPath=/dev/null",
  "-c",
  "core.fsmonitor=false",
  "-c",
  "core.untrackedCache=false",
  "-c",
  "safe.directory=*",
] as const;

/** How long one host git call may take by default. */
export const defaultGitTimeoutMs = 10 * 60 * 1000;

/** Biggest output cordon takes from one host git call by default. */
export const defaultGitOutputBytes = 64 * 1024 * 1024;

export interface HostGitOptions {
  /** The git dir to use: always one cordon wrote, never discovered. */
  gitDir: string;
  /** The tree git looks at; none for calls that read only `stdin`. */
  workTree?: string | undefined;
  /** Where git runs (inside `workTree`; paths it prints are relative to it). Default `workTree`. */
  cwd?: string | undefined;
  /** Bytes written to git's stdin. */
  stdin?: Uint8Array | undefined;
  /**
   * Read the invoking user's global config (`~/.gitconfig`): only for listing the user's own
   * files, where their `core.excludesFile` is meant. Everything else runs with none.
   */
  userConfig?: boolean | undefined;
  /** Extra environment (a private `GIT_INDEX_FILE`, commit identity). */
  env?: Record<string, string> | undefined;
  /** Bytes of stdout accepted; more fails the call. Default 64 MiB. */
  maxBuffer?: number | undefined;
  /**
   * Milliseconds before git is killed. Default 10 minutes. Git blocks forever opening a FIFO
   * where it expects a file (a nested `.git/HEAD` an agent made), so no call may be unbounded.
   */
  timeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
}

/** Why a host git call failed, with what git said. */
export class HostGitError extends Error {
  constructor(
    message: string,
    readonly exitCode: number | string | undefined,
    readonly stderr: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = "HostGitError";
  }

  /** True when git stopped because its output passed `maxBuffer`. */
  get outputTooLarge(): boolean {
    return this.exitCode === "ERR_CHILD_PROCESS_STDIO_MAXBUFFER";
  }

  /** True when git was killed for taking longer than `timeoutMs`. */
  timedOut = false;
}

/**
 * Runs `git <args>` with the repository closed off as described above and returns stdout as
 * bytes. Only PATH (and HOME with `userConfig`) come from this process's environment: a GIT_DIR,
 * GIT_CONFIG_PARAMETERS or GIT_EXEC_PATH of the caller must not steer it.
 */
export function runHostGit(args: readonly string[], options: HostGitOptions): Promise<Buffer> {
  const command = commandOf(args);
  return new Promise((resolve, reject) => {
    const child = execFile(
      "git",
      [...closedConfig, ...args],
      {
        cwd: options.cwd ?? options.workTree ?? "/",
        env: hostGitEnv(options),
        encoding: "buffer",
        maxBuffer: options.maxBuffer ?? defaultGitOutputBytes,
        timeout: options.timeoutMs ?? defaultGitTimeoutMs,
        killSignal: "SIGKILL",
        ...(options.signal ? { signal: options.signal } : {}),
      },
      (error, stdout, stderr) => {
        if (!error) {
          resolve(stdout);
          return;
        }
        const said = stderr.toString("utf8").trim();
        const killed = (error as { killed?: boolean }).killed === true && !options.signal?.aborted;
        const failure = new HostGitError(
          killed
            ? `git ${command} did not finish in ${Math.round((options.timeoutMs ?? defaultGitTimeoutMs) / 1000)} s and was stopped (a FIFO or device where git reads a file, such as a nested .git/HEAD, blocks it)`
            : `git ${command} failed: ${said || error.message}`,
          (error as { code?: number | string }).code,
          said,
          { cause: error },
        );
        failure.timedOut = killed;
        reject(failure);
      },
    );
    // A git that exits before reading all of stdin must not crash the process with EPIPE.
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(options.stdin);
  });
}

/** The environment of a host git call (see `runHostGit`). */
function hostGitEnv(
  options: Pick<HostGitOptions, "gitDir" | "workTree" | "userConfig" | "env">,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    LC_ALL: "C",
    GIT_DIR: options.gitDir,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_ATTR_NOSYSTEM: "1",
    GIT_TERMINAL_PROMPT: "0",
    ...options.env,
  };
  if (options.workTree !== undefined) env["GIT_WORK_TREE"] = options.workTree;
  const home = process.env["HOME"];
  if (options.userConfig && home !== undefined) env["HOME"] = home;
  if (!options.userConfig) env["GIT_CONFIG_GLOBAL"] = "/dev/null";
  return env;
}

function commandOf(args: readonly string[]): string {
  return args.find((arg, i) => !arg.startsWith("-") && args[i - 1] !== "-c") ?? "";
}

/** A host git that reads its stdin as it is written (`spawnHostGit`). */
export interface StreamingHostGit {
  /** Git's stdin: write with backpressure, end it when done. */
  stdin: Writable;
  /** Settles when git exits: stdout on status 0, else a `HostGitError` with what git said. */
  exited: Promise<Buffer>;
  /** Stops git (a seed given up on); `exited` then rejects. */
  kill(): void;
}

/**
 * `runHostGit` for input too large to hold (`git fast-import` of a seed's files): git, closed off
 * the same way, started with its stdin open. No work tree: it reads only what it is given.
 */
export function spawnHostGit(
  args: readonly string[],
  options: Pick<HostGitOptions, "gitDir" | "env" | "maxBuffer" | "signal">,
): StreamingHostGit {
  const command = commandOf(args);
  const child: ChildProcessByStdio<Writable, Readable, Readable> = spawn(
    "git",
    [...closedConfig, ...args],
    {
      cwd: "/",
      env: hostGitEnv(options),
      stdio: ["pipe", "pipe", "pipe"],
      ...(options.signal ? { signal: options.signal, killSignal: "SIGKILL" as const } : {}),
    },
  );
  // A git that exits before reading all of stdin must not crash the process with EPIPE; the
  // writer learns of it from `exited`.
  child.stdin.on("error", () => undefined);
  const collect = (stream: Readable, limit: number): Promise<Buffer> =>
    new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      stream.on("data", (chunk: Buffer) => {
        if (bytes < limit) chunks.push(chunk);
        bytes += chunk.byteLength;
      });
      stream.on("close", () => resolve(Buffer.concat(chunks)));
      stream.on("error", () => resolve(Buffer.concat(chunks)));
    });
  const stdout = collect(child.stdout, options.maxBuffer ?? defaultGitOutputBytes);
  const stderr = collect(child.stderr, 64 * 1024);
  const exited = new Promise<Buffer>((resolve, reject) => {
    child.on("error", (error) =>
      reject(
        new HostGitError(`git ${command} failed: ${error.message}`, undefined, "", {
          cause: error,
        }),
      ),
    );
    child.on("close", (code, signal) => {
      void Promise.all([stdout, stderr]).then(([out, err]) => {
        if (code === 0) {
          resolve(out);
          return;
        }
        const said = err.toString("utf8").trim();
        reject(
          new HostGitError(
            `git ${command} failed: ${said || `exit ${code ?? signal ?? "unknown"}`}`,
            code ?? signal ?? undefined,
            said,
          ),
        );
      });
    });
  });
  // Awaited by the caller; one that gives up first must not leave it unhandled.
  exited.catch(() => undefined);
  return { stdin: child.stdin, exited, kill: () => child.kill("SIGKILL") };
}
