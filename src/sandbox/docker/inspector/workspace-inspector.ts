import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";

import {
  AbortedError,
  FileOperationError,
  SandboxError,
  combineSignals,
  createSilentLogger,
  quoteShellArg,
  withAbort,
  type Logger,
} from "../../../common/index.js";
import { scriptInvocation } from "../../shell/command-line.js";
import { shellScript } from "../../shell/shell-scripts.js";
import type { TreePair } from "../../workspace/index.js";
import type { ContainerClient, CreateContainerRequest } from "../client/index.js";
import type { CreateContainerFrom } from "../support-volumes.js";
import { engineStatusOf } from "../docker-errors.js";
import { ContainerExec } from "../exec/container-exec.js";
import { executorContainerDirectory, recorderContainerPath } from "../resident/executor-binary.js";
import { ResidentTransport } from "../resident/resident-transport.js";
import { HeldStdin, type ExecTransport } from "../../shell/exec-transport.js";

/**
 * The one place cordon runs a program over a tree an agent wrote (DESIGN.md §10, rule 1): a fresh,
 * throwaway container per inspection, never the agent's own container (its processes may still
 * run) and never the host. Git reads the copy there, with whatever the copy holds (a submodule's
 * config naming a filter, a FIFO where a file should be); the worst it can do is lie about a copy
 * the agent could have written anyway, or fail. The host receives bytes on stdout and parses them
 * strictly (parsePatch, parseChangedFiles).
 *
 * The container: the sandbox's image (it has the sandbox's git), no network, a read-only root, no
 * capabilities, no-new-privileges, the sandbox's non-root user, the copy and cordon's baseline git
 * dir mounted read-only, a tmpfs for git's scratch index and objects, bounded memory and pids, and
 * a main process that ends by itself (the engine then removes it) should cordon die before
 * removing it. Mounted the way the sandbox mounts the copy, so an engine-side volume can take the
 * bind's place later.
 */

/** What an inspector reads: a private copy and its baseline, as one sandbox has them. */
export interface InspectedWorkspace {
  /** The sandbox whose copy it is: names the inspector container and its label. */
  sandboxName: string;
  /** Host path of the private copy. */
  workspace: string;
  /** Host path of cordon's baseline git dir of that copy. */
  baselineGitDir: string;
  /** The sandbox's image: the inspector uses the git the sandbox has. */
  image: string;
  /** `uid:gid` of the sandbox user, who owns the copy. */
  user: string;
  /** The sandbox's OCI runtime (runsc under gVisor); default the engine's. */
  runtime?: string | undefined;
  /** The state directory whose manager made it (the `cordon.home` label). */
  stateDirectory?: string | undefined;
  /**
   * Host path of the copy's checkpoint store (`checkpointStoreDir`), mounted only into
   * inspectors that record or restore checkpoints.
   */
  checkpointStore?: string | undefined;
  /**
   * Host path of the private copy of a sandbox forked from this one (`fork`), or its workspace
   * volume when this copy is in `volumes`: mounted read-write at /fork only into the inspector
   * that copies this copy into it, its only writable mount.
   */
  forkTarget?: string | undefined;
  /**
   * The copy's volumes on the engine (docker/workspace-volumes.ts), mounted in place of the three
   * host paths above, which then only name the copy in messages.
   */
  volumes?: { workspace: string; baseline: string; checkpoints: string } | undefined;
}

/**
 * What one inspection computes: inspect-changes.sh's modes read the copy; checkpoint-copy.sh's
 * `record` writes its state into the checkpoint store, `restore` writes a stored state back,
 * `compare` counts what differs between stored states; fork-copy.sh's `fork` copies the copy
 * into a forked sandbox's.
 */
export type InspectionMode =
  "patch" | "changed-files" | "baseline-directories" | "record" | "restore" | "compare" | "fork";

/**
 * What an inspector container may read and write, decided when it is created: `read` writes
 * nothing (the copy and baseline read-only), `record` only the checkpoint store, `restore` the
 * copy and the store (the copy's current state is recorded before it is replaced), `compare`
 * nothing and reads only the baseline and the store (not the copy: a listing needs no disk of
 * the copy mounted), `fork` only the forked sandbox's copy (`forkTarget`), never the copy it reads.
 */
export type InspectorAccess = "read" | "record" | "restore" | "compare" | "fork";

/** The access each mode needs: an inspector runs only modes of its own access. */
const accessOfMode: Record<InspectionMode, InspectorAccess> = {
  patch: "read",
  "changed-files": "read",
  "baseline-directories": "read",
  record: "record",
  restore: "restore",
  compare: "compare",
  fork: "fork",
};

/**
 * How a record or restore treats the index the last idle record kept in the checkpoint store
 * (checkpoint-copy.sh): `keep` starts from it and keeps its own (the sandbox was idle), `reuse`
 * starts from it and keeps none, `fresh` removes it and hashes the whole copy.
 */
export type CheckpointIndexUse = "keep" | "reuse" | "fresh";

export interface InspectionRequest {
  mode: InspectionMode;
  /** The pathspecs of `git add -A`, NUL-separated (compare: the pairs of trees, `comparePairs`). */
  pathspecs: Uint8Array;
  /**
   * The mode's operand (record: the tree to compare with, `-` for the baseline or `none` for no
   * comparison; restore: the tree to restore): a hex object id from cordon's own list, checked
   * here again before it becomes an argument.
   */
  operand?: string | undefined;
  /** Record and restore: see `CheckpointIndexUse`. Default `reuse`. */
  index?: CheckpointIndexUse | undefined;
  /** Milliseconds the inspection may take. Default 10 minutes. */
  timeoutMs?: number | undefined;
  /** Bytes of output accepted; more fails with `too_large`. Default 64 MiB. */
  maxOutputBytes?: number | undefined;
  signal?: AbortSignal | undefined;
}

/** A started inspector: run one inspection, then remove it. */
export interface Inspector {
  run(request: InspectionRequest): Promise<Buffer>;
  remove(): Promise<void>;
}

/** Labels of inspector containers (never `cordon.managed`: they are not sandboxes). */
export const inspectorLabels = {
  /** The sandbox container whose copy it reads. */
  sandbox: "cordon.inspector",
  home: "cordon.home",
} as const;

export const defaultInspectionTimeoutMs = 10 * 60 * 1000;
export const defaultInspectionOutputBytes = 64 * 1024 * 1024;

/** git's scratch index and the agent's files as objects: 1 GiB, counted in the memory limit. */
const scratchTmpfsBytes = 1024 * 1024 * 1024;
const memoryBytes = 2 * 1024 * 1024 * 1024;
const stderrKeptBytes = 64 * 1024;
/** Seconds an inspector lives past its timeout if nobody removes it. */
const leakGraceSeconds = 60;

export interface WorkspaceInspectorsOptions {
  containers: ContainerClient;
  /**
   * Creates an inspector's container (default: `containers.create`): the manager's makes sure the
   * executor's support volume it mounts was not removed meanwhile (`SupportVolumes.createContainer`).
   */
  create?: CreateContainerFrom | undefined;
  logger?: Logger | undefined;
}

/** Starts inspectors on one engine. */
export class WorkspaceInspectors {
  private readonly containers: ContainerClient;
  private readonly create: CreateContainerFrom;
  private readonly logger: Logger;

  constructor(options: WorkspaceInspectorsOptions) {
    this.containers = options.containers;
    this.create =
      options.create ?? (async (makeRequest) => this.containers.create(await makeRequest()));
    this.logger = options.logger ?? createSilentLogger();
  }

  /**
   * Creates and starts an inspector over `target`. Nothing runs over the copy yet, so it may be
   * started before the sandbox is frozen, keeping the pause short.
   */
  async start(target: InspectedWorkspace, options: StartInspectorOptions = {}): Promise<Inspector> {
    try {
      return await this.startOnce(target, options);
    } catch (error) {
      // A loaded engine sometimes fails a start with its own 500 (containerd's "failed to create
      // shim task"); an inspector holds nothing yet, so a second, new one is all it costs.
      if (engineStatusOf(error) !== 500) throw error;
      this.logger.warn({ err: error }, "an inspector did not start; starting another");
      return this.startOnce(target, options);
    }
  }

  private async startOnce(
    target: InspectedWorkspace,
    options: StartInspectorOptions,
  ): Promise<Inspector> {
    const name = `${target.sandboxName}-inspect-${randomBytes(4).toString("hex")}`;
    const timeoutMs = options.timeoutMs ?? defaultInspectionTimeoutMs;
    const access = options.access ?? "read";
    let executorVolume: string | undefined;
    const id = await this.create(async () => {
      // Asked for each attempt: one made again after a prune removed it has another name.
      executorVolume = await options.executorVolume?.();
      return inspectorContainer(name, target, { timeoutMs, access, executorVolume });
    });
    if (id === undefined) {
      throw new SandboxError(`cannot create the inspector ${name}: the name is taken`, {
        fix: "run the command again",
      });
    }
    const remove = async (): Promise<void> => {
      await this.containers.remove(id, name).catch((error: unknown) => {
        // It removes itself once its main process ends; a failure here leaks nothing for long.
        this.logger.warn({ err: error, container: name }, "cannot remove an inspector");
      });
    };
    try {
      await this.containers.start(id, name);
    } catch (error) {
      await remove();
      throw error;
    }
    const exec = new ContainerExec(this.containers, id, name, target.user);
    let transport: ExecTransport = exec;
    if (executorVolume !== undefined) {
      const resident = new ResidentTransport(exec, this.logger);
      // Started now, while nothing runs over the copy; one that does not start leaves plain exec.
      await resident.ping();
      transport = resident;
    }
    // A recorder started ahead reads its request from stdin when `run` sends it (see `ahead`);
    // recorder.c comes in the executor's volume.
    const recorder = executorVolume !== undefined ? recorderContainerPath : undefined;
    const ahead =
      options.ahead && access === "record"
        ? await startAhead(transport, () => this.containers.kill(id), target, recorder).catch(
            (error: unknown) => {
              this.logger.debug({ err: error, container: name }, "no recorder started ahead");
              return undefined;
            },
          )
        : undefined;
    let used = false;
    return {
      run: (inspection) => {
        // One inspection per container: nothing a hostile copy did to it reaches a second one.
        if (used) throw new SandboxError(`the inspector ${name} was used already`);
        if (accessOfMode[inspection.mode] !== access) {
          throw new SandboxError(
            `the inspector ${name} was made to ${access}, not to ${inspection.mode}`,
          );
        }
        used = true;
        const request = { ...inspection, timeoutMs: inspection.timeoutMs ?? timeoutMs };
        if (ahead?.waiting()) return ahead.run(request);
        ahead?.cancel();
        return runInspection(transport, () => this.containers.kill(id), target, request);
      },
      remove: async () => {
        ahead?.cancel();
        await remove();
      },
    };
  }
}

export interface StartInspectorOptions {
  /** Milliseconds its inspection may take. Default 10 minutes. */
  timeoutMs?: number | undefined;
  /** What it may write (see `InspectorAccess`). Default `read`. */
  access?: InspectorAccess | undefined;
  /**
   * A `record` inspector: start its recorder now (checkpoint-copy.sh `ahead`), so the record
   * pays neither the shell's start nor the kept index's copy (a spare's, started a turn ahead).
   */
  ahead?: boolean | undefined;
  /**
   * The resident executor's support volume (`ensureExecutorVolume`), mounted read-only as in the
   * sandbox: the inspector's one inspection is sent over the executor's open stream (started with
   * the container, before the sandbox is frozen) instead of a Docker exec of its own. Asked again
   * if the container is made again (see `WorkspaceInspectorsOptions.create`). Undefined, or
   * resolving to undefined: plain exec.
   */
  executorVolume?: (() => Promise<string | undefined>) | undefined;
}

/** How an inspector's container is made: what `inspectorContainer` needs beside its target. */
export interface InspectorContainerOptions {
  /** Milliseconds its inspection may take: its container ends by itself some time after. */
  timeoutMs: number;
  /** Default `read`. */
  access?: InspectorAccess | undefined;
  /** The executor's support volume to mount (see `StartInspectorOptions.executorVolume`). */
  executorVolume?: string | undefined;
}

/** The hardened, throwaway container of one inspection (see the module comment). */
export function inspectorContainer(
  name: string,
  target: InspectedWorkspace,
  options: InspectorContainerOptions,
): CreateContainerRequest {
  const { timeoutMs, access = "read" } = options;
  const owner = /^(\d+):(\d+)$/.exec(target.user);
  if (!owner) {
    throw new SandboxError(
      `the inspector needs a numeric uid:gid for the sandbox user, not ${target.user}`,
      { fix: 'set sandbox.docker.user to "uid:gid"' },
    );
  }
  const readsStore = access === "record" || access === "restore" || access === "compare";
  if (readsStore && target.checkpointStore === undefined && !target.volumes) {
    throw new SandboxError(`the inspector ${name} needs the copy's checkpoint store to ${access}`);
  }
  if (access === "fork" && target.forkTarget === undefined) {
    throw new SandboxError(`the inspector ${name} needs the forked sandbox's copy to fork into`);
  }
  // A spare waits up to half its deadline before it is used (docker-workspace-changes.ts), so
  // one and a half deadlines cover the wait and a whole inspection.
  const lifetimeSeconds = Math.ceil((timeoutMs * 1.5) / 1000) + leakGraceSeconds;
  return {
    name,
    Image: target.image,
    User: target.user,
    WorkingDir: "/",
    Env: [],
    // It only idles until its one exec; then it ends by itself if nobody removes it.
    Entrypoint: ["sleep"],
    Cmd: [String(lifetimeSeconds)],
    Labels: {
      [inspectorLabels.sandbox]: target.sandboxName,
      ...(target.stateDirectory ? { [inspectorLabels.home]: target.stateDirectory } : {}),
    },
    NetworkDisabled: true,
    HostConfig: {
      NetworkMode: "none",
      ReadonlyRootfs: true,
      Tmpfs: {
        "/scratch": `rw,nosuid,nodev,noexec,size=${scratchTmpfsBytes},uid=${owner[1]},gid=${owner[2]},mode=0700`,
      },
      CapDrop: ["ALL"],
      SecurityOpt: ["no-new-privileges:true"],
      Init: true,
      Privileged: false,
      Memory: memoryBytes,
      MemorySwap: memoryBytes,
      PidsLimit: 256,
      Mounts: inspectorMounts(target, access, options.executorVolume),
      LogConfig: { Type: "json-file", Config: { "max-size": "1m", "max-file": "1" } },
      AutoRemove: true,
      ...(target.runtime ? { Runtime: target.runtime } : {}),
    },
  };
}

/**
 * The copy, the baseline and (to record or restore) the checkpoint store: host paths bound, or the
 * copy's volumes on the engine, mounted alike.
 */
function inspectorMounts(
  target: InspectedWorkspace,
  access: InspectorAccess,
  executorVolume: string | undefined,
): NonNullable<CreateContainerRequest["HostConfig"]["Mounts"]> {
  const volumes = target.volumes;
  const type = volumes ? ("volume" as const) : ("bind" as const);
  const writesStore = access === "record" || access === "restore";
  const store =
    writesStore || access === "compare"
      ? (volumes?.checkpoints ?? target.checkpointStore)
      : undefined;
  const forkTarget = access === "fork" ? target.forkTarget : undefined;
  return [
    ...(access === "compare"
      ? []
      : [
          {
            Type: type,
            Source: volumes?.workspace ?? target.workspace,
            Target: "/workspace",
            ReadOnly: access !== "restore",
          },
        ]),
    {
      Type: type,
      Source: volumes?.baseline ?? target.baselineGitDir,
      Target: "/baseline",
      ReadOnly: true,
    },
    ...(store
      ? [{ Type: type, Source: store, Target: "/checkpoints", ReadOnly: !writesStore }]
      : []),
    ...(forkTarget ? [{ Type: type, Source: forkTarget, Target: "/fork", ReadOnly: false }] : []),
    ...(executorVolume !== undefined
      ? [
          {
            Type: "volume" as const,
            Source: executorVolume,
            Target: executorContainerDirectory,
            ReadOnly: true,
          },
        ]
      : []),
  ];
}

async function runInspection(
  exec: ExecTransport,
  kill: () => Promise<void>,
  target: InspectedWorkspace,
  request: InspectionRequest & { timeoutMs: number },
): Promise<Buffer> {
  const started = await beginInspection(exec, kill, target, {
    invocation: invocationOf(request),
    // A compare has no copy mounted (inspectorMounts).
    workingDir: request.mode === "compare" ? "/" : "/workspace",
    stdin: request.pathspecs,
    maxOutputBytes: request.maxOutputBytes,
  });
  return started.finish(request);
}

/**
 * A record's recorder started ahead of its request: checkpoint-copy.sh `ahead` has started,
 * and copied the kept index (and started recorder.c, when the container has it), and waits on
 * stdin for the request (`record SINCE INDEX`, then the pathspecs), which `run` sends. Reading
 * the copy starts only then.
 */
interface AheadRecord {
  /** Whether it still waits for its request (it has not ended). */
  waiting(): boolean;
  run(request: InspectionRequest & { timeoutMs: number }): Promise<Buffer>;
  /** Ends it without a request (end-of-file: it exits 0 having read nothing of the copy). */
  cancel(): void;
}

async function startAhead(
  exec: ExecTransport,
  kill: () => Promise<void>,
  target: InspectedWorkspace,
  recorder: string | undefined,
): Promise<AheadRecord> {
  let send!: (request: Uint8Array | undefined) => void;
  const rest = new Promise<Uint8Array | undefined>((resolve) => {
    send = resolve;
  });
  const started = await beginInspection(exec, kill, target, {
    invocation: scriptInvocation(shellScript("checkpointCopy"), [
      "ahead",
      ...(recorder ? [recorder] : []),
    ]),
    stdin: new HeldStdin(new Uint8Array(0), rest),
  });
  let ended = false;
  void started.exitCode.finally(() => {
    ended = true;
  });
  // Started means ready: a record sent now waits for nothing the recorder does ahead (its
  // `ready` line). Past the wait, or if it ended, the spare is offered as it is.
  const wait = new AbortController();
  await Promise.race([
    started.firstOutput,
    started.exitCode,
    sleep(aheadReadyWaitMs, undefined, { signal: wait.signal }).catch(() => undefined),
  ]);
  wait.abort();
  return {
    waiting: () => !ended,
    run: async (request) => {
      const [mode, operand, index] = checkpointArguments(request);
      send(Buffer.concat([Buffer.from(`${mode}\0${operand}\0${index}\0`), request.pathspecs]));
      return withoutReadyLine(await started.finish(request));
    },
    cancel: () => send(undefined),
  };
}

/** How long a spare's start waits for its recorder to be ready; past it, its record waits. */
const aheadReadyWaitMs = 30_000;
const readyLine = Buffer.from("ready\n");

function withoutReadyLine(output: Buffer): Buffer {
  if (!output.subarray(0, readyLine.length).equals(readyLine)) {
    throw new SandboxError("the checkpoint recorder started ahead never said it was ready");
  }
  return output.subarray(readyLine.length);
}

/** An inspection's process, started, its output collected: `finish` waits for its end. */
interface StartedInspection {
  /** Its exit status once it ended (never rejects). */
  exitCode: Promise<unknown>;
  /** Resolves once it wrote anything to stdout. */
  firstOutput: Promise<void>;
  finish(request: InspectionRequest & { timeoutMs: number }): Promise<Buffer>;
}

async function beginInspection(
  exec: ExecTransport,
  kill: () => Promise<void>,
  target: InspectedWorkspace,
  start: {
    invocation: ReturnType<typeof scriptInvocation>;
    workingDir?: string | undefined;
    stdin: Uint8Array | HeldStdin;
    maxOutputBytes?: number | undefined;
  },
): Promise<StartedInspection> {
  const maxOutput = start.maxOutputBytes ?? defaultInspectionOutputBytes;
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  let stdoutBytes = 0;
  let stderrBytes = 0;
  let tooLarge = false;
  let outputStarted!: () => void;
  const firstOutput = new Promise<void>((resolve) => {
    outputStarted = resolve;
  });
  const running = await exec.start({
    ...start.invocation,
    workingDir: start.workingDir ?? "/workspace",
    stdin: start.stdin,
    onOutput: (stream, chunk) => {
      const piece = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      if (stream === "stderr") {
        if (stderrBytes < stderrKeptBytes) stderr.push(piece);
        stderrBytes += piece.byteLength;
        return;
      }
      outputStarted();
      stdoutBytes += piece.byteLength;
      if (stdoutBytes > maxOutput) {
        // Bytes past the limit are never kept: the inspector is stopped instead.
        if (!tooLarge) void kill().catch(() => undefined);
        tooLarge = true;
        return;
      }
      stdout.push(piece);
    },
  });
  const exitCode = running.exitCode.catch(() => undefined);
  return {
    exitCode,
    firstOutput,
    finish: async (request) => {
      const signal = combineSignals([request.signal], request.timeoutMs);
      let stopped = false;
      const exitCode = await withAbort(signal, running.exitCode, () => {
        stopped = true;
        running.detach();
        void kill().catch(() => undefined);
      });
      if (tooLarge) {
        throw new FileOperationError(
          `the changes in ${target.workspace} are bigger than ${maxOutput / 1024 / 1024} MiB as a patch`,
          "too_large",
          target.workspace,
          {
            fix: "remove large generated files from the workspace (cordon exec -- git status shows them), or copy them out by hand",
          },
        );
      }
      if (stopped && request.signal?.aborted) {
        throw new AbortedError("reading the workspace's changes was aborted", {
          cause: request.signal.reason,
        });
      }
      if (stopped) {
        throw new SandboxError(
          `reading the changes of ${target.workspace} did not finish in ${Math.round(request.timeoutMs / 1000)} s and was stopped (a FIFO or device where git reads a file, such as a nested .git/HEAD, blocks it)`,
          { fix: inspectionFix },
        );
      }
      if (exitCode !== 0) {
        throw inspectionFailure(target, request.mode, exitCode, Buffer.concat(stderr));
      }
      return Buffer.concat(stdout);
    },
  };
}

/** Tree ids only: the operand comes from cordon's own list, and is checked again here. */
const objectId = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/**
 * A `compare` inspection's stdin: each pair `FROM TO`, NUL-ended, FROM undefined for the
 * baseline. Only tree ids from cordon's own list, checked here again.
 */
export function comparePairs(pairs: readonly TreePair[]): Uint8Array {
  for (const [from, to] of pairs) {
    for (const tree of from === undefined ? [to] : [from, to]) {
      if (!objectId.test(tree)) {
        throw new SandboxError(`not a checkpoint's tree id: ${JSON.stringify(tree)}`);
      }
    }
  }
  return Buffer.from(pairs.map(([from, to]) => `${from ?? "-"} ${to}\0`).join(""));
}

function invocationOf(request: InspectionRequest): ReturnType<typeof scriptInvocation> {
  if (request.mode === "fork") return scriptInvocation(shellScript("forkCopy"), []);
  if (request.mode === "compare")
    return scriptInvocation(shellScript("checkpointCopy"), ["compare"]);
  if (request.mode !== "record" && request.mode !== "restore") {
    return scriptInvocation(shellScript("inspectChanges"), [request.mode]);
  }
  return scriptInvocation(shellScript("checkpointCopy"), checkpointArguments(request));
}

/** checkpoint-copy.sh's MODE OPERAND INDEX, each checked: only ids from cordon's own list. */
function checkpointArguments(request: InspectionRequest): [string, string, CheckpointIndexUse] {
  if (request.mode !== "record" && request.mode !== "restore") {
    throw new SandboxError(`not a checkpoint's mode: ${request.mode}`);
  }
  const operand = request.operand ?? "-";
  if (!(objectId.test(operand) || (request.mode === "record" && ["-", "none"].includes(operand)))) {
    throw new SandboxError(`not a checkpoint's tree id: ${JSON.stringify(operand)}`);
  }
  const index = request.index ?? "reuse";
  if (!["keep", "reuse", "fresh"].includes(index)) {
    throw new SandboxError(`not a way to use the kept index: ${JSON.stringify(index)}`);
  }
  return [request.mode, operand, index];
}

const inspectionFix =
  "look at the workspace with `cordon exec -- git status` and remove what blocks git (`cordon exec -- find . -type p` lists FIFOs), or discard it with `cordon sandbox rm <name>`";

/** What a failed inspection was doing, for its message. */
const doing: Record<InspectionMode, string> = {
  patch: "take the changes of",
  "changed-files": "take the changes of",
  "baseline-directories": "read the baseline of",
  record: "record a checkpoint of",
  restore: "restore a checkpoint into",
  compare: "count the changes between checkpoints of",
  fork: "fork",
};

function inspectionFailure(
  target: InspectedWorkspace,
  mode: InspectionMode,
  exitCode: number,
  stderr: Buffer,
): Error {
  const said = stderr.toString("utf8").trim();
  if (exitCode === 127 && /git: (command )?not found/.test(said)) {
    return new SandboxError(
      `the sandbox image ${target.image} has no git, which reads a private copy's changes (in a throwaway container of that image)`,
      { fix: "add git to the image (apt-get install -y git), or leave sandbox.docker.image unset" },
    );
  }
  if (mode === "fork") {
    // cp's own words name the file: one the sandbox user cannot read, or a full disk budget.
    const lines = said.split("\n");
    const shown =
      lines.slice(0, 5).join("; ") + (lines.length > 5 ? ` (and ${lines.length - 5} more)` : "");
    return new SandboxError(
      `cannot fork ${target.workspace}: the copy exited ${exitCode}${said ? `: ${shown}` : ""}`,
      {
        fix: "a file the sandbox user cannot read stops a fork: make it readable in the parent (`cordon exec --session S -- chmod u+r FILE`); a full copy needs a larger sandbox.disk",
      },
    );
  }
  const unreadable = unreadablePaths(said);
  if (unreadable.length > 0) {
    // Agent-chosen names, put in a command the user may paste: quoted for the shell, and never
    // one with a control character (a terminal escape, a line break) at all.
    // eslint-disable-next-line no-control-regex
    const printable = unreadable.filter((entry) => !/[\u0000-\u001f\u007f-\u009f]/.test(entry));
    const shown = printable.slice(0, 5).map(quoteShellArg);
    const left = unreadable.length - shown.length;
    const more = left > 0 ? `${shown.length > 0 ? " and " : ""}${left} more` : "";
    return new SandboxError(
      `cannot ${doing[mode]} ${target.workspace}: the sandbox user cannot read ${shown.join(", ")}${more} (made unreadable inside the sandbox, e.g. by chmod 000), so git cannot read the copy`,
      {
        fix: `make them readable (\`cordon exec --session S -- chmod -R u+rwX ${shown.length > 0 ? shown.join(" ") : "PATH"}\`), or undo the turn that did it (\`cordon rollback --session S --turn -1\`: a rollback makes them readable first)`,
      },
    );
  }
  return new SandboxError(
    `cannot ${doing[mode]} ${target.workspace}: git ${exitCode === 137 ? "was killed (out of memory or scratch space?)" : `exited ${exitCode}`}${said ? `: ${said}` : ""}`,
    { fix: inspectionFix },
  );
}

/**
 * The paths git said it could not read for want of permission (`open("x"): Permission denied`,
 * `could not open directory 'd/': Permission denied`): agent-chosen names, only ever shown quoted.
 */
export function unreadablePaths(gitStderr: string): string[] {
  const found = new Set<string>();
  for (const match of gitStderr.matchAll(
    /(?:open\("(.+?)"\)|could not open directory '(.+?)'): Permission denied/g,
  )) {
    const entry = match[1] ?? match[2];
    if (entry) found.add(entry);
  }
  return [...found];
}
