import { SandboxStartError, sleep, throwIfAborted, type Logger } from "../../common/index.js";
import type { SandboxSpec } from "../spec.js";
import type {
  ContainerClient,
  ContainerDetails,
  ContainerState,
  CreateContainerRequest,
} from "./client/index.js";
import { isBusy } from "./container-activity.js";
import { labelKeys } from "./container-options.js";
import { holdFreezeMarker, type FreezeWaitOptions } from "./freeze-marker.js";
import type { ResolvedImage } from "./manager-image.js";
import type { CreateContainerFrom } from "./support-volumes.js";

export type SettlePhase = "create" | "start" | "reuse" | "wait";

export interface SettleOptions {
  containers: ContainerClient;
  spec: SandboxSpec;
  image: ResolvedImage;
  /** The state directory of the manager: a container labelled with another one is not adopted. */
  stateDirectory: string;
  /** The request a fresh container is created from (asked only when one is created). */
  createRequest: () => Promise<CreateContainerRequest>;
  /**
   * Creates it from `createRequest` (default: `containers.create`): the manager's makes sure the
   * support volumes it mounts were not removed meanwhile (`SupportVolumes.createContainer`).
   */
  create?: CreateContainerFrom | undefined;
  /** Whether this process holds a lease on the container: drift then keeps it (stale). */
  held: () => boolean;
  /**
   * Called right before a container is removed to be replaced (the manager marks the record
   * used, so a prune elsewhere does not take the private workspace for an orphan meanwhile).
   */
  beforeReplace: () => Promise<void>;
  /**
   * Makes the sandbox's egress proxy exist (or removes leftovers without egress):
   * before a container is created, and on reuse of one with egress.
   */
  ensureEgress: () => Promise<void>;
  /**
   * The container as its identity says (a taken pool member's record overrides its labels:
   * container-identity.ts). Default: its own labels.
   */
  identify?: ((container: ContainerDetails) => Promise<ContainerDetails>) | undefined;
  signal?: AbortSignal | undefined;
  progress: (phase: SettlePhase, message: string) => void;
  log: Logger;
  /** How long to wait for a container another process is changing (ms, default 250). */
  retryDelayMs?: number | undefined;
  /**
   * How a container another cordon command has frozen is waited for (freeze-marker.ts: for up to
   * 10 minutes, said after 1 s, its marker looked at every 100 ms).
   */
  freezeWait?: Pick<FreezeWaitOptions, "boundMs" | "announceAfterMs" | "pollMs"> | undefined;
}

export interface Settled {
  container: ContainerDetails;
  /** This call created it. */
  fresh: boolean;
  /** It runs another config or image and was kept because it is busy. */
  stale: boolean;
}

/** How often a container that another process is changing is looked at again. */
const settleAttempts = 20;

/**
 * Brings the container of `spec` to a running state it may be used in (DESIGN.md §5), deciding
 * from its labels and state alone — Docker is the source of truth:
 *
 * - absent: created and started (a 409 means another process created it: look again);
 * - not cordon's, or cordon's for another scope key or state directory: refused, never removed;
 * - removing or restarting: waited for; paused by a live cordon command (a rollback, a diff: its
 *   freeze marker) waited for, up to a bound; paused otherwise (a crashed command's freeze, a
 *   `docker pause`): resumed;
 * - never started, or stopped on purpose (exit 0 or 143, what `docker stop` sends): started in
 *   place, once; killed (137), OOM-killed, any other exit, or a start that fails: replaced;
 * - another config hash or image: recreated when idle, kept and flagged stale when held or busy.
 */
export async function settleContainer(options: SettleOptions): Promise<Settled> {
  const { containers, spec, progress, log } = options;
  const name = spec.containerName;
  const delayMs = options.retryDelayMs ?? 250;
  // Containers this call already started: found stopped again, it cannot run.
  const started = new Set<string>();
  const failedStarts = new Set<string>();
  for (let attempt = 0; attempt < settleAttempts; attempt += 1) {
    throwIfAborted(options.signal, "sandbox acquire");
    const found = await containers.inspect(name);
    const container = found && options.identify ? await options.identify(found) : found;
    if (!container) {
      progress("create", `creating ${name}`);
      const created = await createStarted(options);
      // A 409: another process created it between our inspect and create.
      if (created) return { container: created, fresh: true, stale: false };
      continue;
    }
    assertAdoptable(container, spec, options.stateDirectory);
    const state = container.state;
    if (state.status === "removing" || state.restarting) {
      await sleep(delayMs, options.signal);
      continue;
    }
    if (state.status === "paused") {
      // Holding the marker, no live command has it frozen: one that had is waited for (another
      // session's rollback must not be resumed mid-write), a dead one's marker is taken over.
      await holdFreezeMarker(
        options.stateDirectory,
        name,
        async () => {
          if ((await containers.inspect(container.id))?.state.paused) {
            await containers.unpause(container.id);
          }
        },
        {
          signal: options.signal,
          ...options.freezeWait,
          onWait: (message) => progress("wait", message),
        },
      );
      continue;
    }
    if (!state.running) {
      // Never started (a process that crashed between create and start, or one about to
      // start it: a second start is a no-op), or stopped on purpose (`docker stop`, an engine
      // restart): start it again in place, once. tmpfs and processes are fresh anyway, and a
      // writable root keeps what the agent installed.
      const startable = state.status === "created" || stoppedCleanly(state);
      if (startable && !started.has(container.id)) {
        started.add(container.id);
        progress("start", `starting ${name}`);
        try {
          await containers.start(container.id, name);
          continue;
        } catch (error) {
          failedStarts.add(container.id);
          log.info({ err: error }, "a sandbox container does not start; replacing it");
        }
      } else if (state.status === "created" && !failedStarts.has(container.id)) {
        // Our start returned, yet it still reads "created": another process's start of the
        // same container is under way (the engine answers a second start before the first
        // has finished). Wait for it; replacing it would pull it from under that process.
        await sleep(delayMs, options.signal);
        continue;
      }
      const why = state.oomKilled
        ? "was killed for memory"
        : state.status === "created"
          ? "does not start"
          : `exited with code ${state.exitCode}`;
      progress("create", `${name} ${why}; replacing it with a fresh container`);
      log.info(
        { exitCode: state.exitCode, oomKilled: state.oomKilled },
        "replacing a dead sandbox",
      );
      await options.beforeReplace();
      await containers.remove(container.id, name);
      continue;
    }
    const drift = driftOf(container, spec, options.image);
    if (drift) {
      if (options.held() || (await isBusy(containers, container.id))) {
        return { container, fresh: false, stale: true };
      }
      progress("create", `${name} was made from ${drift}; recreating it`);
      await options.beforeReplace();
      await containers.remove(container.id, name);
      continue;
    }
    // Its proxy may have been stopped or removed meanwhile (an engine restart, docker rm).
    if (spec.egress) await options.ensureEgress();
    progress("reuse", `reusing ${name}`);
    return { container, fresh: false, stale: false };
  }
  throw new SandboxStartError(
    `the sandbox container ${name} did not settle into a running state (another process keeps changing it)`,
    { fix: `retry; if it persists, \`cordon sandbox rm ${name}\`` },
  );
}

/** Refuses containers cordon must not use: not made by cordon, or made for something else. */
export function assertAdoptable(
  container: ContainerDetails,
  spec: SandboxSpec,
  stateDirectory: string,
): void {
  const labels = container.labels;
  const name = spec.containerName;
  if (labels[labelKeys.managed] !== "true") {
    throw new SandboxStartError(
      `a container named ${name} exists but cordon did not create it; cordon will not use or remove it`,
      {
        fix: `if it is not yours to keep, remove it with \`docker rm -f ${name}\`; otherwise change sandbox.docker.containerPrefix`,
      },
    );
  }
  const mismatch: string[] = [];
  if (labels[labelKeys.scopeKey] !== spec.scopeKey) {
    mismatch.push(`scope key ${labels[labelKeys.scopeKey] ?? "(none)"}, not ${spec.scopeKey}`);
  }
  if (labels[labelKeys.home] !== stateDirectory) {
    mismatch.push(`state directory ${labels[labelKeys.home] ?? "(none)"}, not ${stateDirectory}`);
  }
  if (mismatch.length > 0) {
    throw new SandboxStartError(
      `the container ${name} was made by cordon for something else (${mismatch.join("; ")}); cordon will not adopt it`,
      { fix: `remove it with \`cordon sandbox rm ${name}\` (or \`docker rm -f ${name}\`)` },
    );
  }
}

/** What differs between a running container and the spec, or undefined when nothing does. */
function driftOf(
  container: ContainerDetails,
  spec: SandboxSpec,
  image: ResolvedImage,
): string | undefined {
  const labels = container.labels;
  if (labels[labelKeys.configHash] !== spec.configHash) {
    return `config ${labels[labelKeys.configHash] ?? "(none)"} (now ${spec.configHash})`;
  }
  // The id, not the tag: a tag that now names a newer build (or pull) is drift too.
  if (labels[labelKeys.image] !== image.reference || container.imageId !== image.id) {
    return `image ${labels[labelKeys.image] ?? container.image} ${container.imageId.slice(7, 19)} (now ${image.reference} ${image.id.slice(7, 19)})`;
  }
  return undefined;
}

/**
 * Creates and starts the container; undefined on a name conflict. Anything it made is removed
 * again when a later step fails, and the original error is what the caller sees.
 */
async function createStarted(options: SettleOptions): Promise<ContainerDetails | undefined> {
  const { containers, spec } = options;
  const name = spec.containerName;
  // The proxy first: the sandbox's forwarded port leads to it from its first command.
  await options.ensureEgress();
  const id = options.create
    ? await options.create(options.createRequest)
    : await containers.create(await options.createRequest());
  if (id === undefined) return undefined;
  try {
    options.progress("start", `starting ${name}`);
    await containers.start(id, name);
    const container = await containers.inspect(id);
    if (!container?.state.running) {
      const state = container?.state;
      throw new SandboxStartError(
        `the sandbox container ${name} stopped right after it started (${state ? `exit code ${state.exitCode}${state.error ? `: ${state.error}` : ""}` : "it is gone"})`,
        { fix: "the image must provide `sleep`; check sandbox.docker.image" },
      );
    }
    return container;
  } catch (error) {
    await containers
      .remove(id, name)
      .catch((cleanup: unknown) =>
        options.log.warn({ err: cleanup, sandbox: name }, "cannot remove a sandbox that failed"),
      );
    throw error;
  }
}

/**
 * Stopped on purpose rather than died: exit 0, or 143 (SIGTERM, what `docker stop` and an engine
 * shutdown send, forwarded by the init process). A kill (137), an OOM kill or any other exit
 * means the container died, and it is replaced.
 */
function stoppedCleanly(state: ContainerState): boolean {
  return !state.oomKilled && !state.dead && (state.exitCode === 0 || state.exitCode === 143);
}
