import os from "node:os";
import path from "node:path";

import { createSilentLogger, stateDirectory, type Logger } from "../common/index.js";
import {
  hostPathOwner,
  hostProcessOwner,
  hostEntryKind,
  hostRealpath,
  loadConfig,
  mergeLayers,
  type ConfigOverrides,
  type ConfigSource,
  type CordonConfig,
  type LoadedConfig,
  type AgentRuntimeName,
} from "../config/index.js";
import {
  builtinToolCatalog,
  extendToolCatalog,
  planRun,
  type PlanRunInput,
  type RunLimitsRequest,
  type RunPlan,
  type ToolCatalog,
} from "../policy/index.js";
import {
  DockerEngine,
  baseImageFromEnv,
  upstreamProxyFromEnv,
  type SandboxLease,
} from "../sandbox/index.js";
import { builtinTools, type ToolDefinition } from "../tools/index.js";
import type { ToolResult } from "../tools/index.js";
import type { RunIO, RunResult } from "./loop/index.js";
import { createModelClient, type ModelClient, type UserContentBlock } from "./model/index.js";
import type { Checkpoint, CheckpointListEntry, CheckpointTarget } from "../changes/index.js";
import {
  callTool,
  defaultSandboxes,
  sessionCheckpointCalls,
  forkSession,
  forkSessionSandbox,
  type ForkSandboxRequest,
  type ForkSessionRequest,
  type SessionFork,
  type SessionRollback,
  disposeSandbox,
  failedRun,
  runTask,
  type ProvideSandboxOptions,
  type RunnerEvent,
  type SandboxProvider,
  type SandboxDisposal,
  type SandboxDisposalMode,
  forwardLeasePort,
  type SandboxPortForward,
  type SandboxPortForwardRequest,
  setupBeforeRun,
  type RunTaskOptions,
  type SetupPhase,
  type SetupSandboxes,
} from "./orchestrate/index.js";
import { SessionLanes } from "./session/index.js";
import { createSessionHost, type ChildRunRequest } from "./subagents/index.js";
import { holdSandboxes } from "./runner-holdings.js";
import { onceUntilFailure } from "./once-until-failure.js";
import { agentRuntimeOf } from "./runtimes/index.js";

export interface RunnerOptions {
  /** Where a `cordon.json5` is looked for and relative paths resolve. Default `process.cwd()`. */
  cwd?: string | undefined;
  /** Environment for config layering, API keys and DOCKER_HOST. Default `process.env`. */
  env?: NodeJS.ProcessEnv | undefined;
  /** A config file; default `CORDON_CONFIG`, else `<cwd>/cordon.json5`, else built-in defaults. */
  configPath?: string | undefined;
  /** The top config layer (what CLI flags set). */
  configOverrides?: ConfigOverrides | undefined;
  /** The agent workspace for every agent (`--workspace`); absolute. */
  workspace?: string | undefined;
  /**
   * Whatever the config says, run sandboxed on a seeded private copy with one container per
   * session (`fix-tests` needs this: its changes are taken and verified as a patch).
   */
  forceSeededCopy?: boolean | undefined;
  /**
   * Workspace paths copied into the seeded copy (`--carry`); replaces `sandbox.carry`. A path
   * that does not exist is a usage error.
   */
  carry?: readonly string[] | undefined;
  /** An already loaded config; skips file loading (and so `configOverrides`, `workspace`, `forceSeededCopy`). */
  config?: CordonConfig | undefined;
  /** The model; default: the scripted model when `modelScript` is set, else the Anthropic API. */
  model?: ModelClient | undefined;
  /** A scripted-model file (docs/scripted-model.md). */
  modelScript?: string | undefined;
  /** Extra tools, offered next to the built-in ones (the policy decides which a run gets). */
  tools?: readonly ToolDefinition[] | undefined;
  /** Where tools run; default Docker containers by scope key, or the host in mode off. */
  sandboxes?: SandboxProvider | undefined;
  /**
   * The agent program for every run of this runner (`--runtime`), over `agents.*.runtime`:
   * cordon's own loop, or Claude Code in the sandbox (docs/runtimes.md).
   */
  runtime?: AgentRuntimeName | undefined;
  /** Hosts every plan of this runner may reach through the egress proxy (`--allow-host`). */
  allowHosts?: readonly string[] | undefined;
  /**
   * What `close()` (and `await using`) does with the sandboxes this runner's runs and calls used:
   * `stop` them (default: nothing keeps running after the program ends; the private copies stay
   * for `cordon diff` and the next run starts them again), `remove` them (containers and private
   * copies, unapplied changes included, as `--rm`), or `keep` them running. A sandbox a live run
   * of another process holds is always kept.
   */
  onClose?: SandboxDisposalMode | undefined;
  /** Runs that may be in flight at once in this runner. Default 4. */
  maxConcurrentRuns?: number | undefined;
  logger?: Logger | undefined;
}

/**
 * What one run is about. Its `RunIO` fields (`signal`, `onEvent`, `steering`, `followUps`) reach
 * the agent loop as they are.
 */
export interface RunRequest extends RunIO<RunnerEvent> {
  prompt: string | UserContentBlock[];
  agentId?: string | undefined;
  /** e.g. `fix-123` (becomes `agent:<id>:fix-123`) or a full key; default the agent's main session. */
  sessionKey?: string | undefined;
  /** Overrides the agent's model for this run. */
  modelId?: string | undefined;
  /**
   * This run's model client, over the runner's (`fix-tests --attempts` gives each attempt its
   * own scripted model: a script is played once, by one run).
   */
  model?: ModelClient | undefined;
  /** This run's limits (`--max-turns`, `--timeout`, `--thinking`), over the config's. */
  limits?: RunLimitsRequest | undefined;
  /** Run-level tool policy, the last (narrowest) layer. */
  allowTools?: readonly string[] | undefined;
  denyTools?: readonly string[] | undefined;
  /**
   * When another process's run holds the session: wait for it (default, with a `session-wait`
   * event), or end at once with a `sandbox_error` result, exit code 3.
   */
  waitForSession?: boolean | undefined;
  /**
   * Remove this run's sandbox (container and private copy) once the run has ended, however it
   * ended, as `cordon run --rm` does — unless a live run of another process holds it.
   */
  rm?: boolean | undefined;
  /**
   * A command that prepares the sandbox first (`--setup-cmd`, e.g. `npm ci`) in a container of
   * its own under its own egress allowlist; the agent gets a fresh container on the same private
   * copy. A setup that fails ends the run as `setup_failed` (exit 9) before any model call.
   */
  setup?: SetupPhase | undefined;
}

export type PlanRequest = Pick<
  RunRequest,
  "agentId" | "sessionKey" | "allowTools" | "denyTools" | "limits"
> & {
  /**
   * This plan's egress allowlist, replacing the config's and `allowHosts` (a setup phase, e.g.
   * `npm ci` with the registry allowed, before an agent phase that gets the run's own policy).
   */
  phaseAllowHosts?: readonly string[] | undefined;
  /**
   * Sandboxes of one piece of work that copy the carried trees (`--carry`) once between them: a
   * new seeded copy planned with the same key layers them over one shared, read-only snapshot.
   */
  carryShare?: string | undefined;
};

/**
 * The engine as a library. It holds sandboxes: `close()` (or `await using runner = …`) waits for
 * its runs and calls in flight, then stops or removes every sandbox they used (`onClose`), then
 * waits for the backend's background work (a warm pool's refill); after it, runs end with a
 * `sandbox_error` result and acquires are refused.
 */
export interface Runner extends AsyncDisposable {
  /** cordon's state directory: sessions, private workspaces, sandbox records. */
  readonly stateDir: string;
  /** The plan a run would get (exactly what `cordon sandbox explain` prints). */
  plan(request?: PlanRequest): Promise<RunPlan>;
  /**
   * The config file this runner reads, how it was found and whether it is trusted; undefined
   * when there is none or the config was passed in code.
   */
  configSource(): Promise<ConfigSource | undefined>;
  /** The config this runner plans with (file, environment and overrides, defaults applied). */
  config(): Promise<CordonConfig>;
  /** Plans, acquires the sandbox, runs the agent loop. Never throws: failures are results. */
  run(request: RunRequest): Promise<RunResult>;
  /**
   * A run that failed before it could be asked for (its prompt unreadable, its setup failed),
   * reported as a run is: one `run-start` and one `run-end` to `onEvent`.
   */
  failedRun(
    error: unknown,
    request?: Pick<RunRequest, "sessionKey" | "onEvent" | "signal">,
  ): RunResult;
  /**
   * The sandbox a run with this request would get (for `cordon exec`, `cordon tool`, diffs), with
   * the plan it was acquired by; release the lease when done (the container stays for reuse).
   */
  acquireSandbox(
    request?: PlanRequest & {
      signal?: AbortSignal | undefined;
      onProgress?: ProvideSandboxOptions["onProgress"];
      onEgress?: ProvideSandboxOptions["onEgress"];
      readsChanges?: ProvideSandboxOptions["readsChanges"];
    },
  ): Promise<{ plan: RunPlan; lease: SandboxLease }>;
  /**
   * Forks the sandbox this request maps to into the session `as`: a new sandbox whose private
   * copy starts as this one's is now (every file, read with it frozen by a throwaway container),
   * whose diff is still against the same baseline (so it shows every change since the
   * repository), with a container of its own (a warm pool member when one waits). Returns the
   * fork's plan and lease, held as `acquireSandbox`'s: release it when done. `as` must have no
   * sandbox yet (`ForkTargetExistsError`, exit 2); on failure nothing of the fork is left.
   */
  forkSandbox(request: ForkSandboxRequest): Promise<{ plan: RunPlan; lease: SandboxLease }>;
  /**
   * Forks a session into new ones (`cordon fork`): `as`, or with `count` `<as>-1` … `<as>-<count>`,
   * each made as `forkSandbox` makes one and released. Refused while a run holds the session
   * (`SessionBusyError`, exit 3); the session is locked meanwhile; all or nothing.
   */
  fork(request: ForkSessionRequest): Promise<SessionFork[]>;
  /**
   * Forwards a port of this host (127.0.0.1 unless `address` says otherwise) to 127.0.0.1:
   * `remotePort` inside the sandbox this request maps to, over its executor's stream: the sandbox
   * keeps network none. The sandbox is held until `close()` (`cordon port-forward`).
   */
  forwardPort(
    request: PlanRequest & SandboxPortForwardRequest & { signal?: AbortSignal | undefined },
  ): Promise<SandboxPortForward>;
  /**
   * Removes the sandbox (container and private workspace) a request maps to, if any;
   * `keepWorkspace` removes only the container (and every process in it), so the next acquire
   * makes a fresh one on the same private workspace.
   */
  discardSandbox(request?: PlanRequest, options?: { keepWorkspace?: boolean }): Promise<void>;
  /**
   * Stops or removes the sandbox a request maps to, unless a live run of another process holds it;
   * says what became of it (undefined: the plan has no sandbox).
   */
  disposeSandbox(
    request: PlanRequest,
    mode: SandboxDisposalMode,
  ): Promise<SandboxDisposal | undefined>;
  /**
   * Waits for this runner's runs and calls in flight, then does `onClose` (default: stop) to every
   * sandbox they used; one entry for each. Calling it again returns the same answer.
   */
  close(): Promise<SandboxDisposal[]>;
  /**
   * Runs one tool through exactly the policy and sandbox path an agent's call takes: a tool the
   * plan does not allow is refused (`refused: true`) with the config key that blocks it.
   */
  callTool(
    name: string,
    input: unknown,
    request?: PlanRequest & { signal?: AbortSignal | undefined },
  ): Promise<ToolResult & { refused: boolean; invalidInput: boolean }>;
  /**
   * Records the session's private copy as it is now as a checkpoint (default name `cp-<n>`); a
   * throwaway container reads the copy with the sandbox frozen (docs/checkpoints.md).
   */
  checkpoint(request?: CheckpointRequest & { name?: string | undefined }): Promise<Checkpoint>;
  /**
   * The session copy's checkpoints, oldest first (its runs' turns, named ones, rollbacks), and the
   * turns whose record failed in their place (`isMissedTurn`: a `missed` reason, no tree), which
   * `rollback` refuses to go to. Turns' counts of changed files are taken now; when that fails
   * (the engine does not answer, the sandbox image is not built: the listing builds nothing) the
   * list comes without them and `onUncounted` is told why.
   */
  checkpoints(request?: CheckpointsRequest): Promise<CheckpointListEntry[]>;
  /**
   * Puts the session's copy back to a checkpoint (`{ name }`, or `{ turn: -1 }` for the state
   * before the last turn): refused while a run holds the session; the agent's processes are left
   * and listed, or stopped first with `stopProcesses`; the transcript gets a note.
   */
  rollback(
    request: CheckpointRequest & { to: CheckpointTarget; stopProcesses?: boolean | undefined },
  ): Promise<SessionRollback>;
}

/** Which session's copy, and who hears why its turns' counts could not be taken. */
export type CheckpointsRequest = PlanRequest & {
  onUncounted?: ((reason: string) => void) | undefined;
};

/** Which session's copy, and the usual signal and progress. */
export type CheckpointRequest = PlanRequest & {
  signal?: AbortSignal | undefined;
  onProgress?: ProvideSandboxOptions["onProgress"];
};

/** The flag layer of the config: `--workspace` and the forced seeded copy beat every agent's own. */
function overridesOf(options: RunnerOptions): ConfigOverrides | undefined {
  const defaults: Record<string, unknown> = {};
  if (options.workspace) defaults["workspace"] = options.workspace;
  if (options.forceSeededCopy) {
    defaults["sandbox"] = { mode: "all", scope: "session", workspaceAccess: "none", seed: true };
  }
  if (Object.keys(defaults).length === 0) return options.configOverrides;
  return mergeLayers(options.configOverrides ?? {}, { agents: { defaults } }) as ConfigOverrides;
}

/** What the planner gets for one request: the host's facts, the runner's layer, the request's. */
function planInputOf(
  runner: { options: RunnerOptions; config: CordonConfig; stateDir: string; catalog: ToolCatalog },
  request: PlanRequest,
): PlanRunInput {
  const { options } = runner;
  return {
    config: runner.config,
    agentId: request.agentId,
    sessionKey: request.sessionKey,
    stateDir: runner.stateDir,
    homeDir: os.homedir(),
    realpath: hostRealpath,
    entryKind: hostEntryKind,
    pathOwner: hostPathOwner,
    invokingUser: hostProcessOwner(),
    catalog: runner.catalog,
    carry: options.carry,
    carryShare: request.carryShare,
    runtime: options.runtime,
    runTools: {
      allow: request.allowTools ? [...request.allowTools] : undefined,
      deny: request.denyTools ? [...request.denyTools] : undefined,
    },
    runEgress: { allow: options.allowHosts, only: request.phaseAllowHosts },
    runLimits: request.limits,
  };
}

/** The config file (or the config passed in), its warnings logged once. */
function configLoader(
  options: RunnerOptions,
  context: { cwd: string; env: NodeJS.ProcessEnv; stateDir: string; logger: Logger },
): () => Promise<Pick<LoadedConfig, "config" | "source">> {
  // A config that failed to load (a typo being fixed) is read again on the next call.
  return onceUntilFailure(async () => {
    if (options.config) return { config: options.config };
    const loaded = await loadConfig({
      cwd: context.cwd,
      env: context.env,
      configPath: options.configPath,
      overrides: overridesOf(options),
      stateDir: context.stateDir,
    });
    for (const warning of loaded.warnings) context.logger.warn(warning);
    return loaded;
  });
}

/** A run a session tool starts (`sessions_spawn`, `sessions_send`), as a request of its own. */
function childRequest(child: ChildRunRequest): RunRequest {
  return {
    prompt: child.prompt,
    agentId: child.agentId,
    sessionKey: child.sessionKey,
    modelId: child.modelId,
    limits: { timeoutMs: child.timeoutMs },
    signal: child.signal,
    onEvent: child.onEvent,
  };
}

/** The run's setup phase, if it asks for one, as the orchestrator runs it (under its lock). */
function setupStage(sandboxes: SetupSandboxes, request: RunRequest): RunTaskOptions["setup"] {
  const { setup } = request;
  if (!setup) return undefined;
  return ({ emit }) =>
    setupBeforeRun({
      runner: sandboxes,
      setup,
      agentId: request.agentId,
      sessionKey: request.sessionKey,
      signal: request.signal,
      emit,
    });
}

/**
 * The library entry point: config → policy plan → sandbox → tools → session → agent loop, the very
 * path `cordon run` takes.
 *
 * ```ts
 * const runner = createRunner({ cwd: "/path/to/repo" });
 * const result = await runner.run({ prompt: "Fix the failing test", onEvent: console.log });
 * ```
 */
export function createRunner(options: RunnerOptions = {}): Runner {
  const env = options.env ?? process.env;
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const stateDir = stateDirectory(env);
  const logger = options.logger ?? createSilentLogger();
  const tools = [...builtinTools(), ...(options.tools ?? [])];
  const catalog = options.tools?.length
    ? extendToolCatalog(builtinToolCatalog, { tools: options.tools.map((tool) => tool.name) })
    : builtinToolCatalog;
  const lanes = new SessionLanes({ maxConcurrentRuns: options.maxConcurrentRuns });
  const provider =
    options.sandboxes ??
    defaultSandboxes({
      engine: DockerEngine.fromEnv(env),
      stateDir,
      logger,
      upstreamProxy: upstreamProxyFromEnv(env),
      baseImage: baseImageFromEnv(env),
    });
  const holdings = holdSandboxes({ provider, stateDir, onClose: options.onClose ?? "stop" });
  const { sandboxes, track } = holdings;
  const loadedConfig = configLoader(options, { cwd, env, stateDir, logger });

  // A failed creation (no API key) is retried on the next run rather than kept.
  const modelClient = onceUntilFailure(async () => {
    if (options.model) return options.model;
    const { model: configured } = (await loadedConfig()).config;
    return createModelClient({
      env,
      apiKeyEnv: typeof configured === "string" ? undefined : [configured.apiKeyEnv ?? []].flat(),
      stateDir,
      scriptPath: options.modelScript,
      logger,
    });
  });

  /** The plan a request gets: every decision about the run, made once (policy/plan-run.ts). */
  const plan = async (request: PlanRequest = {}): Promise<RunPlan> =>
    planRun(
      planInputOf({ options, config: (await loadedConfig()).config, stateDir, catalog }, request),
    );

  const acquireSandbox: Runner["acquireSandbox"] = async (request = {}) => {
    const runPlan = await plan(request);
    const lease = await sandboxes.acquire(runPlan, {
      signal: request.signal,
      onProgress: request.onProgress,
      onEgress: request.onEgress,
      readsChanges: request.readsChanges,
    });
    // A run shows them with its sandbox-ready event; here the progress line is the only place.
    for (const warning of lease.warnings ?? []) {
      request.onProgress?.({ phase: "warning", message: `warning: ${warning}` });
    }
    return { plan: runPlan, lease };
  };

  const discardSandbox: Runner["discardSandbox"] = async (request = {}, discardOptions = {}) => {
    await sandboxes.discard?.(await plan(request), discardOptions);
  };

  // Child runs (sessions_spawn, sessions_send) have a lane of their own: a parent holds its
  // global slot while it waits for its child, so children taking global slots could deadlock.
  const subagentLanes = onceUntilFailure(async () => {
    const { config } = await loadedConfig();
    return new SessionLanes({ maxConcurrentRuns: config.agents.defaults.subagents.maxConcurrent });
  });

  const runOn = (request: RunRequest, runLanes: SessionLanes): Promise<RunResult> =>
    runTask({
      plan: () => plan(request),
      model: request.model ?? modelClient,
      modelId: request.modelId,
      requestedSessionKey: request.sessionKey,
      sandboxes,
      tools,
      stateDir,
      prompt: request.prompt,
      io: request,
      logger,
      lanes: runLanes,
      waitForSession: request.waitForSession,
      setup: setupStage({ acquireSandbox, discardSandbox }, request),
      agentRuntime: (runPlan) => Promise.resolve(agentRuntimeOf(runPlan.agent.runtime, env)),
      sessionHost: ({ plan: runPlan, runId, emit }) =>
        createSessionHost({
          stateDir,
          plan: runPlan,
          runId,
          emit,
          logger,
          planSession: (target) => plan(target),
          runChild: async (child) => runOn(childRequest(child), await subagentLanes()),
          discardSandbox: async (target) => {
            await sandboxes.discard?.(await plan(target), {});
          },
        }),
    });

  const disposeFor = async (
    request: PlanRequest,
    mode: SandboxDisposalMode,
  ): Promise<SandboxDisposal | undefined> =>
    disposeSandbox({ sandboxes: provider, plan: await plan(request), mode, stateDir });

  return {
    stateDir,
    plan,
    configSource: async () => (await loadedConfig()).source,
    config: async () => (await loadedConfig()).config,
    acquireSandbox: (request) => track(acquireSandbox(request)),
    forkSandbox: (request) => track(forkSessionSandbox({ plan, sandboxes }, request)),
    fork: (request) => track(forkSession({ plan, sandboxes, stateDir }, request)),
    forwardPort: async (request) =>
      forwardLeasePort((await track(acquireSandbox(request))).lease, request, stateDir),
    disposeSandbox: disposeFor,
    close: holdings.close,
    async [Symbol.asyncDispose]() {
      await holdings.close();
    },
    discardSandbox,
    async callTool(name, input, request = {}) {
      const runPlan = await plan(request);
      return track(
        callTool({ tools, plan: runPlan, sandboxes, logger, name, input, signal: request.signal }),
      );
    },
    run(request) {
      return track(
        (async () => {
          const result = await runOn(request, lanes);
          if (request.rm) {
            const disposal = await disposeFor(request, "remove").catch((error: unknown) => {
              logger.warn({ err: error }, "rm: the run's sandbox could not be removed");
              return undefined;
            });
            if (disposal?.outcome === "kept") logger.info(disposal, "rm: the sandbox was kept");
          }
          return result;
        })(),
      );
    },
    failedRun(error, request = {}) {
      return failedRun({ error, ...request, logger });
    },
    ...sessionCheckpointCalls({ plan, sandboxes, stateDir, logger, track }),
  };
}
