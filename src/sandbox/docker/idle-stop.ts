import path from "node:path";

import { createSilentLogger, messageOf, type Logger } from "../../common/index.js";
import { labelKeys } from "./container-options.js";
import { labelsOf } from "./container-identity.js";
import type { ContainerSummary } from "./client/index.js";
import { isBusy } from "./container-activity.js";
import type { DockerEngine } from "./engine.js";
import { SandboxRecords } from "./records.js";
import { egressLabels } from "./egress/egress-proxies.js";

/**
 * Who holds a sandbox outside this process: a reason to keep it running (e.g. the live run whose
 * session lock says it uses it), or undefined. `session` is the container's session label.
 */
export type SandboxHolders = (sandbox: { name: string; session: string }) => string | undefined;

export interface IdleStopOptions {
  engine: DockerEngine;
  /** The state directory whose sandboxes are looked at (their `cordon.home` label). */
  stateDirectory: string;
  /** Stop sandboxes unused for longer than this (ms); must be positive. */
  idleMs: number;
  /** Names this process holds: never stopped. */
  keep?: ReadonlySet<string> | undefined;
  /** What live runs of other processes hold: never stopped. */
  holders?: SandboxHolders | undefined;
  logger?: Logger | undefined;
  /** "Now", for tests. */
  now?: Date | undefined;
}

export interface IdleStopReport {
  stopped: { name: string; lastUsedAt: string }[];
  /** Idle by their records, but kept running, with why. */
  skipped: { name: string; reason: string }[];
}

/** How long `docker stop` waits after SIGTERM; an idle sandbox runs only init and `sleep`. */
const stopGraceSeconds = 5;

/**
 * Stops (never removes) the running sandboxes of a state directory that nobody used for `idleMs`,
 * so they hold no memory; the private workspace and the container's writable layer stay, and the
 * next acquire starts the container again (the manager starts a cleanly stopped one in place).
 * Its egress proxy, if it has one, is stopped with it.
 *
 * Never stopped: a sandbox this process holds, one a live run of any process holds (its session
 * lock), one with commands running in it (`docker top`: an `exec -it` shell, a background server),
 * and one whose record was touched meanwhile (read again right before the stop). What is lost is
 * what a stop always loses: processes, and the tmpfs mounts (/tmp, HOME).
 */
export async function stopIdleSandboxes(options: IdleStopOptions): Promise<IdleStopReport> {
  const report: IdleStopReport = { stopped: [], skipped: [] };
  const now = (options.now ?? new Date()).getTime();
  const logger = options.logger ?? createSilentLogger();
  const records = new SandboxRecords(options.stateDirectory);
  const containers = options.engine.containers;
  const idleSince = async (container: ContainerSummary, name: string) => {
    const record = await records.read(name);
    const labels = labelsOf(container, record);
    const lastUsedAt = record?.lastUsedAt ?? labels[labelKeys.createdAt];
    // A pool member nobody took waits started on purpose (its idle limit removes it).
    const waiting = labels[labelKeys.scopeKey]?.startsWith("pool:") === true;
    const idle =
      !waiting && lastUsedAt !== undefined && now - Date.parse(lastUsedAt) > options.idleMs;
    return { idle, lastUsedAt: lastUsedAt ?? "", session: labels[labelKeys.session] ?? "" };
  };

  const running = await containers.list({
    labels: [
      `${labelKeys.managed}=true`,
      `${labelKeys.home}=${path.resolve(options.stateDirectory)}`,
    ],
    runningOnly: true,
  });
  for (const container of running) {
    const name = container.name;
    if (options.keep?.has(name)) continue;
    const { idle, session } = await idleSince(container, name);
    if (!idle) continue;
    const holder = options.holders?.({ name, session });
    if (holder) {
      report.skipped.push({ name, reason: holder });
      continue;
    }
    if (await isBusy(containers, container.id)) {
      report.skipped.push({ name, reason: "idle by its record, but commands run in it" });
      continue;
    }
    // An acquire in another process marks the record used before it uses the container.
    const again = await idleSince(container, name);
    if (!again.idle) continue;
    try {
      // Already stopped or removed meanwhile: there is nothing to stop.
      if (!(await stopSandbox({ ...options, name, now: new Date(now) }))) continue;
    } catch (error) {
      report.skipped.push({ name, reason: `cannot stop it: ${messageOf(error)}` });
      continue;
    }
    logger.debug({ sandbox: name, lastUsedAt: again.lastUsedAt }, "stopped an idle sandbox");
    report.stopped.push({ name, lastUsedAt: again.lastUsedAt });
  }
  return report;
}

/**
 * Stops one sandbox's container and its egress proxy, recording that cordon stopped it on purpose
 * (prune then treats it as resting, not broken, and the next acquire starts it in place). The
 * caller has decided nobody needs it. False when it was not running (stopped or gone already).
 * Throws when the engine refuses the container's stop; a proxy that will not stop is only logged.
 */
export async function stopSandbox(options: {
  engine: DockerEngine;
  stateDirectory: string;
  name: string;
  logger?: Logger | undefined;
  now?: Date | undefined;
}): Promise<boolean> {
  const { name } = options;
  if (!(await options.engine.containers.stop(name, { graceSeconds: stopGraceSeconds }))) {
    return false;
  }
  const stoppedAt = (options.now ?? new Date()).toISOString();
  await new SandboxRecords(options.stateDirectory)
    .update(name, (record) => ({ ...record, idleStoppedAt: stoppedAt }))
    .catch(() => undefined);
  const report: IdleStopReport = { stopped: [], skipped: [] };
  await stopEgressProxy(options, name, report);
  for (const skipped of report.skipped) {
    (options.logger ?? createSilentLogger()).warn(skipped, "egress proxy not stopped");
  }
  return true;
}

/**
 * Its egress proxy serves nobody while it is stopped; the next acquire starts a fresh one
 * (EgressProxies.ensure replaces a proxy that is not running).
 */
async function stopEgressProxy(
  options: { engine: DockerEngine; stateDirectory: string },
  sandbox: string,
  report: IdleStopReport,
): Promise<void> {
  const home = path.resolve(options.stateDirectory);
  const containers = options.engine.containers;
  try {
    const proxies = await containers.list({
      labels: [`${egressLabels.sandbox}=${sandbox}`, `${egressLabels.home}=${home}`],
      runningOnly: true,
    });
    for (const proxy of proxies) {
      await containers.stop(proxy.id, { graceSeconds: stopGraceSeconds });
    }
  } catch (error) {
    report.skipped.push({
      name: `${sandbox} egress proxy`,
      reason: `cannot stop it: ${messageOf(error)}`,
    });
  }
}
