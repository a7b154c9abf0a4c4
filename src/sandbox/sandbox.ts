/**
 * The `Sandbox`: the only way tools reach a filesystem or run a command. Two backends implement
 * it: `DockerSandbox` (a container; the container is the agent's only filesystem) and
 * `HostSandbox` (mode off; confined to the workspace root). Paths are sandbox paths: relative ones
 * resolve against `workdir`; absolute ones are absolute inside the sandbox.
 *
 * Every method takes an optional `signal`; aborting stops the work (and, for exec, kills the
 * command's whole process tree) and rejects with `AbortedError`.
 */

export type FileType = "file" | "directory" | "symlink" | "other";

export interface FileStat {
  /** The path as the sandbox resolved it (absolute, inside the sandbox). */
  path: string;
  type: FileType;
  /** Bytes. */
  size: number;
  /** Permission bits, e.g. 0o644. */
  mode: number;
  mtimeMs: number;
}

export interface DirEntry {
  /** Path relative to the listed directory, `/`-separated (nested when depth > 1). */
  name: string;
  type: FileType;
  size: number;
}

export interface SignalOption {
  signal?: AbortSignal | undefined;
}

export interface ExecOptions extends SignalOption {
  /** Working directory inside the sandbox; default `workdir`. Must exist and be inside the sandbox. */
  cwd?: string | undefined;
  /** Extra environment for this call only. */
  env?: Readonly<Record<string, string>> | undefined;
  /** Bytes written to the command's stdin, then closed. Without it stdin is empty. */
  stdin?: string | Uint8Array | undefined;
  /** Kill the whole process tree after this long. Default: no limit (the signal still applies). */
  timeoutMs?: number | undefined;
  /**
   * Output kept in memory per stream; beyond it the middle is dropped (head and tail kept) and the
   * full output is saved to a log file inside the sandbox. Default 1 MiB.
   */
  maxOutputBytes?: number | undefined;
  /** Called with output as it arrives (already demultiplexed). */
  onStdout?: ((chunk: Uint8Array) => void) | undefined;
  onStderr?: ((chunk: Uint8Array) => void) | undefined;
}

export interface ExecResult {
  /**
   * The command's exit code; null when it was killed by a signal (see `signal`). Shells report a
   * death by signal N as 128 + N, and so the two cannot be told apart: 137 reads as SIGKILL.
   */
  exitCode: number | null;
  /** e.g. "SIGKILL" when the process died of a signal. */
  signal?: string | undefined;
  stdout: string;
  stderr: string;
  /** True when head/tail truncation dropped output; `fullOutputPath` then holds all of it. */
  truncated: boolean;
  /** Sandbox path of the complete output log, when truncated. */
  fullOutputPath?: string | undefined;
  timedOut: boolean;
  /** The kernel's OOM killer ended it (memory limit). */
  oomKilled: boolean;
  durationMs: number;
}

/** `ReadFileOptions.maxBytes` when not given: 64 MiB. */
export const defaultMaxReadBytes = 64 * 1024 * 1024;
/** `ListOptions.limit` when not given. */
export const defaultListLimit = 10_000;

export interface ReadFileOptions extends SignalOption {
  /** Refuse files larger than this many bytes (`FileOperationError`, reason too_large). Default 64 MiB. */
  maxBytes?: number | undefined;
}

export interface WriteFileOptions extends SignalOption {
  /** Create missing parent directories. Default true. */
  createParents?: boolean | undefined;
  /** Permission bits for a new file; an existing file keeps its mode. */
  mode?: number | undefined;
}

export interface ListOptions extends SignalOption {
  /** 1 = direct children only. Default 1. */
  depth?: number | undefined;
  /** Stop after this many entries; `truncated` is then set on the result. Default 10 000. */
  limit?: number | undefined;
}

export interface ListResult {
  entries: DirEntry[];
  truncated: boolean;
}

export interface RemoveOptions extends SignalOption {
  recursive?: boolean | undefined;
}

/** A background process started with `processes.start`. */
export interface ProcessInfo {
  id: string;
  command: string;
  /** running, or exited with `exitCode`. */
  state: "running" | "exited";
  exitCode: number | null;
  startedAt: string;
}

export interface ProcessOutput {
  info: ProcessInfo;
  /** Output since the previous poll (stdout and stderr interleaved as produced). */
  output: string;
}

/** Background processes of one sandbox: the base of the `process` tool. */
export interface ProcessTable {
  start(command: string, options?: Omit<ExecOptions, "timeoutMs" | "stdin">): Promise<ProcessInfo>;
  list(options?: SignalOption): Promise<ProcessInfo[]>;
  /** New output since the last poll. */
  poll(id: string, options?: SignalOption): Promise<ProcessOutput>;
  /** The whole output so far (bounded). */
  log(id: string, options?: SignalOption): Promise<ProcessOutput>;
  write(id: string, data: string, options?: SignalOption): Promise<void>;
  /** Kills the process and its whole tree. */
  kill(id: string, options?: SignalOption): Promise<ProcessInfo>;
}

/**
 * The files of one sandbox (`sandbox.files`), as E2B's `sandbox.files`. Paths are sandbox paths;
 * every failure is a `FileOperationError` with a `reason` (not_found, read_only, too_large, …).
 */
export interface SandboxFiles {
  readFile(path: string, options?: ReadFileOptions): Promise<Uint8Array>;
  /** Atomic: readers see the old or the new content, never a mix. */
  writeFile(path: string, data: string | Uint8Array, options?: WriteFileOptions): Promise<void>;
  /** undefined when nothing exists at `path` (a dangling symlink stats as "symlink"). */
  stat(path: string, options?: SignalOption): Promise<FileStat | undefined>;
  list(path: string, options?: ListOptions): Promise<ListResult>;
  /** Creates the directory and its missing parents; an existing directory is fine. */
  mkdir(path: string, options?: SignalOption): Promise<void>;
  remove(path: string, options?: RemoveOptions): Promise<void>;
  rename(from: string, to: string, options?: SignalOption): Promise<void>;
}

/**
 * A sandbox is three parts: `exec` runs one command to its end, `files` reaches the filesystem,
 * `processes` keeps commands running in the background. Tools get this interface and nothing
 * more: it has no way to stop, remove or reach around the sandbox.
 */
export interface Sandbox {
  /** Stable id, e.g. the container name, or "host". */
  readonly id: string;
  readonly kind: "docker" | "host";
  /** The working directory paths resolve against (`/workspace` in a container). */
  readonly workdir: string;

  /**
   * Runs `command` with bash (so pipes, globs and && work) in the sandbox user's login
   * environment (a profile the command's predecessors changed applies: docs/architecture.md, "The
   * login environment"). Never throws for a non-zero exit;
   * throws `FileOperationError` when `cwd` is unusable (missing, not a directory, outside). The call
   * returns when the command exits, and whatever it left running is killed then: long-lived
   * processes belong in `processes.start`.
   */
  exec(command: string, options?: ExecOptions): Promise<ExecResult>;
  readonly files: SandboxFiles;
  readonly processes: ProcessTable;
}
