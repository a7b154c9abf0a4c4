/**
 * An in-memory `Sandbox` for unit tests: a POSIX-like file tree (`files`, with read-only prefixes
 * to play a `ro` mount), scripted exec and background processes, and a record of every call.
 */
import { posix } from "node:path";
import { AbortedError, FileOperationError } from "../../common/index.js";
import {
  defaultListLimit,
  defaultMaxReadBytes,
  type DirEntry,
  type ExecOptions,
  type ExecResult,
  type FileStat,
  type ListOptions,
  type ListResult,
  type ProcessInfo,
  type ProcessOutput,
  type ProcessTable,
  type ReadFileOptions,
  type RemoveOptions,
  type Sandbox,
  type SandboxFiles,
  type SignalOption,
  type WriteFileOptions,
} from "../../sandbox/index.js";

type Node =
  | { kind: "file"; data: Uint8Array; mode: number; mtimeMs: number }
  | { kind: "dir"; mode: number; mtimeMs: number };

/** One piece of a scripted command's output, delivered `afterMs` after the one before. */
export interface ScriptedChunk {
  stdout?: string | undefined;
  stderr?: string | undefined;
  /** Wait before it, in milliseconds (a real timer: fake timers drive it). Default 0. */
  afterMs?: number | undefined;
}

/**
 * What a scripted command does: its result (missing fields default to success, no output), and
 * optionally its output as it streams (`chunks`, delivered in order to `onStdout`/`onStderr`;
 * `stdout`/`stderr` then default to the chunks joined).
 */
export type ScriptedExec = Partial<ExecResult> & { chunks?: ScriptedChunk[] | undefined };

/** A scripted command: what exec does for `command`. */
export type ExecScript = (
  command: string,
  options: ExecOptions,
) => ScriptedExec | Promise<ScriptedExec>;

export interface MemorySandboxOptions {
  /** Default "memory". */
  id?: string;
  /** Default "/workspace". */
  workdir?: string;
  /** Initial files by path (relative to workdir or absolute); parents are created. */
  files?: Record<string, string | Uint8Array>;
  /** Absolute prefixes where every modification fails with reason read_only. */
  readOnly?: string[];
  exec?: ExecScript;
}

/** What a `MemorySandbox` records a call under; a typo in a test is a type error, not a silent []. */
export type RecordedMethod =
  "exec" | `files.${keyof SandboxFiles}` | `processes.${keyof ProcessTable}`;

export interface RecordedCall {
  method: RecordedMethod;
  args: unknown[];
}

const encoder = new TextEncoder();
const DEFAULT_MAX_OUTPUT = 1024 * 1024;

export class MemorySandbox implements Sandbox {
  readonly id: string;
  readonly kind = "docker" as const;
  readonly workdir: string;
  readonly calls: RecordedCall[] = [];
  readonly files: MemoryFiles;
  readonly processes: MemoryProcessTable;
  execScript: ExecScript | undefined;
  #logs = 0;

  constructor(options: MemorySandboxOptions = {}) {
    this.id = options.id ?? "memory";
    this.workdir = options.workdir ?? "/workspace";
    this.execScript = options.exec;
    this.files = new MemoryFiles({
      workdir: this.workdir,
      readOnly: options.readOnly ?? [],
      record: (method, args) => this.calls.push({ method: `files.${method}`, args }),
    });
    this.processes = new MemoryProcessTable(this);
    for (const [path, data] of Object.entries(options.files ?? {})) this.files.setFile(path, data);
  }

  /** The calls recorded under `method` ("exec", "files.readFile", "processes.start", …). */
  callsTo(method: RecordedMethod): RecordedCall[] {
    return this.calls.filter((call) => call.method === method);
  }

  async exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    await yieldTurn();
    this.calls.push({ method: "exec", args: [command, { ...options }] });
    checkSignal(options);
    const { chunks, ...scripted } = (await this.execScript?.(command, options)) ?? {};
    let stdout = scripted.stdout ?? "";
    let stderr = scripted.stderr ?? "";
    if (chunks) {
      for (const chunk of chunks) {
        if (chunk.afterMs) await delay(chunk.afterMs, options.signal);
        if (chunk.stdout) options.onStdout?.(encoder.encode(chunk.stdout));
        if (chunk.stderr) options.onStderr?.(encoder.encode(chunk.stderr));
      }
      stdout = scripted.stdout ?? chunks.map((chunk) => chunk.stdout ?? "").join("");
      stderr = scripted.stderr ?? chunks.map((chunk) => chunk.stderr ?? "").join("");
    } else {
      if (stdout) options.onStdout?.(encoder.encode(stdout));
      if (stderr) options.onStderr?.(encoder.encode(stderr));
    }
    const max = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    const keptOut = headTail(stdout, max);
    const keptErr = headTail(stderr, max);
    const truncated = keptOut !== stdout || keptErr !== stderr;
    let fullOutputPath: string | undefined;
    if (truncated) {
      fullOutputPath = `/tmp/cordon-exec-${++this.#logs}.log`;
      this.files.setFile(fullOutputPath, stdout + stderr);
    }
    return {
      exitCode: 0,
      timedOut: false,
      oomKilled: false,
      durationMs: 5,
      ...scripted,
      stdout: keptOut,
      stderr: keptErr,
      truncated: scripted.truncated ?? truncated,
      fullOutputPath: scripted.fullOutputPath ?? fullOutputPath,
    };
  }
}

interface MemoryFilesOptions {
  workdir: string;
  readOnly: string[];
  record: (method: keyof SandboxFiles, args: unknown[]) => void;
}

/**
 * The file tree of a `MemorySandbox`: the `SandboxFiles` operations (recorded as
 * "files.<method>"), and test helpers that set and inspect files without a record or a
 * read-only check.
 */
export class MemoryFiles implements SandboxFiles {
  /** Absolute prefixes where every modification fails with reason read_only. */
  readOnly: string[];
  readonly #workdir: string;
  readonly #record: MemoryFilesOptions["record"];
  readonly #nodes = new Map<string, Node>();
  #clock = 1_700_000_000_000;

  constructor(options: MemoryFilesOptions) {
    this.#workdir = options.workdir;
    this.readOnly = options.readOnly;
    this.#record = options.record;
    this.#nodes.set("/", { kind: "dir", mode: 0o755, mtimeMs: this.#clock });
    this.#mkdirp(this.#workdir);
    this.#mkdirp("/tmp");
  }

  // ---- test helpers (not part of SandboxFiles) ----

  /** Creates or replaces a file directly, bypassing read-only checks and call records. */
  setFile(path: string, data: string | Uint8Array, mode = 0o644): void {
    const abs = this.resolve(path);
    this.#mkdirp(posix.dirname(abs));
    this.#nodes.set(abs, { kind: "file", data: toBytes(data), mode, mtimeMs: this.#tick() });
  }

  /** Sets a file's content keeping its mtime: a change that size+mtime checks would miss. */
  setFileKeepingMtime(path: string, data: string | Uint8Array): void {
    const abs = this.resolve(path);
    const node = this.#nodes.get(abs);
    if (node?.kind !== "file") throw new Error(`no file at ${abs}`);
    this.#nodes.set(abs, { ...node, data: toBytes(data) });
  }

  getFile(path: string): Uint8Array | undefined {
    const node = this.#nodes.get(this.resolve(path));
    return node?.kind === "file" ? node.data : undefined;
  }

  getText(path: string): string | undefined {
    const data = this.getFile(path);
    return data === undefined
      ? undefined
      : new TextDecoder("utf-8", { ignoreBOM: true }).decode(data);
  }

  has(path: string): boolean {
    return this.#nodes.has(this.resolve(path));
  }

  /** Every file path, sorted. */
  filePaths(): string[] {
    return [...this.#nodes.entries()]
      .filter(([, node]) => node.kind === "file")
      .map(([path]) => path)
      .sort();
  }

  resolve(path: string): string {
    return posix.resolve(this.#workdir, path);
  }

  // ---- SandboxFiles ----

  async readFile(path: string, options: ReadFileOptions = {}): Promise<Uint8Array> {
    await yieldTurn();
    this.#record("readFile", [path, { ...options }]);
    checkSignal(options);
    const abs = this.resolve(path);
    const node = this.#nodes.get(abs);
    if (!node) throw new FileOperationError(`no such file: ${abs}`, "not_found", abs);
    if (node.kind === "dir") throw new FileOperationError(`is a directory`, "is_directory", abs);
    if (node.data.byteLength > (options.maxBytes ?? defaultMaxReadBytes)) {
      throw new FileOperationError(`file too large`, "too_large", abs);
    }
    return node.data.slice();
  }

  async writeFile(
    path: string,
    data: string | Uint8Array,
    options: WriteFileOptions = {},
  ): Promise<void> {
    await yieldTurn();
    this.#record("writeFile", [path, data, { ...options }]);
    checkSignal(options);
    const abs = this.resolve(path);
    this.#checkWritable(abs);
    const existing = this.#nodes.get(abs);
    if (existing?.kind === "dir")
      throw new FileOperationError(`is a directory`, "is_directory", abs);
    const parent = posix.dirname(abs);
    const parentNode = this.#nodes.get(parent);
    if (!parentNode) {
      if (options.createParents === false) {
        throw new FileOperationError(`no such directory: ${parent}`, "not_found", abs);
      }
      this.#checkParentsCreatable(parent);
      this.#mkdirp(parent);
    } else if (parentNode.kind !== "dir") {
      throw new FileOperationError(`not a directory: ${parent}`, "not_directory", abs);
    }
    const mode = existing?.kind === "file" ? existing.mode : (options.mode ?? 0o644);
    this.#nodes.set(abs, { kind: "file", data: toBytes(data), mode, mtimeMs: this.#tick() });
  }

  async stat(path: string, options: SignalOption = {}): Promise<FileStat | undefined> {
    await yieldTurn();
    this.#record("stat", [path]);
    checkSignal(options);
    const abs = this.resolve(path);
    const node = this.#nodes.get(abs);
    if (!node) return undefined;
    return {
      path: abs,
      type: node.kind === "dir" ? "directory" : "file",
      size: node.kind === "file" ? node.data.byteLength : 4096,
      mode: node.mode,
      mtimeMs: node.mtimeMs,
    };
  }

  async list(path: string, options: ListOptions = {}): Promise<ListResult> {
    await yieldTurn();
    this.#record("list", [path, { ...options }]);
    checkSignal(options);
    const abs = this.resolve(path);
    const node = this.#nodes.get(abs);
    if (!node) throw new FileOperationError(`no such directory`, "not_found", abs);
    if (node.kind !== "dir") throw new FileOperationError(`not a directory`, "not_directory", abs);
    const depth = options.depth ?? 1;
    const limit = options.limit ?? defaultListLimit;
    const prefix = abs === "/" ? "/" : `${abs}/`;
    const entries: DirEntry[] = [];
    for (const [childPath, child] of [...this.#nodes.entries()].sort(([a], [b]) =>
      a < b ? -1 : 1,
    )) {
      if (!childPath.startsWith(prefix) || childPath === abs) continue;
      const name = childPath.slice(prefix.length);
      if (name.split("/").length > depth) continue;
      if (entries.length >= limit) return { entries, truncated: true };
      entries.push({
        name,
        type: child.kind === "dir" ? "directory" : "file",
        size: child.kind === "file" ? child.data.byteLength : 4096,
      });
    }
    return { entries, truncated: false };
  }

  async mkdir(path: string, options: SignalOption = {}): Promise<void> {
    await yieldTurn();
    this.#record("mkdir", [path]);
    checkSignal(options);
    const abs = this.resolve(path);
    this.#checkParentsCreatable(abs);
    this.#mkdirp(abs);
  }

  async remove(path: string, options: RemoveOptions = {}): Promise<void> {
    await yieldTurn();
    this.#record("remove", [path, { ...options }]);
    checkSignal(options);
    const abs = this.resolve(path);
    this.#checkWritable(abs);
    const node = this.#nodes.get(abs);
    if (!node) throw new FileOperationError(`no such file`, "not_found", abs);
    if (node.kind === "dir") {
      const children = [...this.#nodes.keys()].filter((p) => p.startsWith(`${abs}/`));
      if (children.length > 0 && !options.recursive) {
        throw new FileOperationError(`directory not empty`, "other", abs);
      }
      for (const child of children) this.#nodes.delete(child);
    }
    this.#nodes.delete(abs);
  }

  async rename(from: string, to: string, options: SignalOption = {}): Promise<void> {
    await yieldTurn();
    this.#record("rename", [from, to]);
    checkSignal(options);
    const src = this.resolve(from);
    const dst = this.resolve(to);
    this.#checkWritable(src);
    this.#checkWritable(dst);
    const node = this.#nodes.get(src);
    if (!node) throw new FileOperationError(`no such file`, "not_found", src);
    const parent = this.#nodes.get(posix.dirname(dst));
    if (!parent) throw new FileOperationError(`no such directory`, "not_found", dst);
    if (node.kind === "dir") {
      for (const [path, child] of [...this.#nodes.entries()]) {
        if (path.startsWith(`${src}/`)) {
          this.#nodes.delete(path);
          this.#nodes.set(dst + path.slice(src.length), child);
        }
      }
    }
    this.#nodes.delete(src);
    this.#nodes.set(dst, node);
  }

  // ---- internals ----

  #checkWritable(abs: string): void {
    for (const prefix of this.readOnly) {
      if (abs === prefix || abs.startsWith(`${prefix}/`)) {
        throw new FileOperationError(`read-only file system: ${abs}`, "read_only", abs);
      }
    }
  }

  #checkParentsCreatable(abs: string): void {
    let current = abs;
    while (!this.#nodes.has(current)) {
      this.#checkWritable(current);
      current = posix.dirname(current);
    }
    if (this.#nodes.get(current)?.kind !== "dir") {
      throw new FileOperationError(`not a directory: ${current}`, "not_directory", abs);
    }
  }

  #mkdirp(abs: string): void {
    const parts = abs.split("/").filter(Boolean);
    let current = "";
    for (const part of parts) {
      current += `/${part}`;
      const node = this.#nodes.get(current);
      if (node?.kind === "file") {
        throw new FileOperationError(`not a directory: ${current}`, "not_directory", abs);
      }
      if (!node) this.#nodes.set(current, { kind: "dir", mode: 0o755, mtimeMs: this.#tick() });
    }
  }

  #tick(): number {
    this.#clock += 1000;
    return this.#clock;
  }
}

interface MemoryProcess {
  info: ProcessInfo;
  output: string;
  polled: number;
  stdin: string;
}

/** Background processes whose output and exit the test drives (`emit`, `exit`). */
export class MemoryProcessTable implements ProcessTable {
  readonly #processes = new Map<string, MemoryProcess>();
  #next = 0;

  constructor(private readonly sandbox: MemorySandbox) {}

  async start(
    command: string,
    options: Omit<ExecOptions, "timeoutMs" | "stdin"> = {},
  ): Promise<ProcessInfo> {
    await yieldTurn();
    this.sandbox.calls.push({ method: "processes.start", args: [command, { ...options }] });
    const id = `proc-${++this.#next}`;
    const info: ProcessInfo = {
      id,
      command,
      state: "running",
      exitCode: null,
      startedAt: "2026-01-01T00:00:00.000Z",
    };
    this.#processes.set(id, { info, output: "", polled: 0, stdin: "" });
    return { ...info };
  }

  async list(): Promise<ProcessInfo[]> {
    await yieldTurn();
    return [...this.#processes.values()].map((p) => ({ ...p.info }));
  }

  async poll(id: string): Promise<ProcessOutput> {
    await yieldTurn();
    const process = this.#get(id);
    const output = process.output.slice(process.polled);
    process.polled = process.output.length;
    return { info: { ...process.info }, output };
  }

  async log(id: string): Promise<ProcessOutput> {
    await yieldTurn();
    const process = this.#get(id);
    return { info: { ...process.info }, output: process.output };
  }

  async write(id: string, data: string): Promise<void> {
    await yieldTurn();
    const process = this.#get(id);
    if (process.info.state !== "running") {
      throw new FileOperationError(`process ${id} has exited`, "other", id);
    }
    process.stdin += data;
  }

  async kill(id: string): Promise<ProcessInfo> {
    await yieldTurn();
    const process = this.#get(id);
    process.info = { ...process.info, state: "exited", exitCode: null };
    return { ...process.info };
  }

  // ---- test helpers ----
  emit(id: string, text: string): void {
    this.#get(id).output += text;
  }

  exit(id: string, exitCode: number): void {
    const process = this.#get(id);
    process.info = { ...process.info, state: "exited", exitCode };
  }

  stdinOf(id: string): string {
    return this.#get(id).stdin;
  }

  #get(id: string): MemoryProcess {
    const process = this.#processes.get(id);
    if (!process) throw new FileOperationError(`no process with id ${id}`, "not_found", id);
    return process;
  }
}

function checkSignal(options: SignalOption): void {
  if (options.signal?.aborted) throw new AbortedError("aborted");
}

function toBytes(data: string | Uint8Array): Uint8Array {
  return typeof data === "string" ? encoder.encode(data) : data.slice();
}

function headTail(text: string, max: number): string {
  if (text.length <= max) return text;
  const half = Math.floor(max / 2);
  return text.slice(0, half) + text.slice(text.length - half);
}

/** Every operation really is asynchronous, so concurrent tool calls interleave as they would. */
/** Waits `ms`, or rejects with `AbortedError` when `signal` fires first (as a killed command). */
function delay(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new AbortedError("aborted"));
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new AbortedError("aborted"));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function yieldTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
