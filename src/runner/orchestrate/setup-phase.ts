import { EnvironmentError } from "../../common/index.js";
import { hostCaBundleCandidates } from "../../policy/index.js";
import {
  detectTlsInspection,
  type EgressDecision,
  type SandboxLease,
  type SandboxSpec,
  type TlsInspection,
} from "../../sandbox/index.js";
import { registriesOf } from "./package-registries.js";
import type { RunnerEvent } from "./run-task.js";
import type { ProvideSandboxOptions } from "./sandbox-provider.js";

/** A command that prepares the workspace (`npm ci`) before the agent phase, and what it may reach. */
export interface SetupPhase {
  command: string;
  /** Hosts the setup command may reach (`--setup-allow-host`); the agent phase does not get them. */
  allowHosts: readonly string[];
}

export interface SetupRun {
  command: string;
  exitCode: number | null;
  timedOut: boolean;
  /** The last part of its output, stdout and stderr interleaved. */
  outputTail: string;
  durationMs: number;
  /** Hosts the egress proxy refused while it ran: what to add to `--setup-allow-host`. */
  refused: string[];
  /**
   * When it failed with nothing refused: an allowed host whose HTTPS this network re-signs with a
   * CA the host trusts and the sandbox, without `trustHostCertificates`, does not.
   */
  tlsInspection?: TlsInspection | undefined;
  /** It ran with no network at all (no `--setup-allow-host`, no egress proxy). */
  offline?: boolean | undefined;
}

/** Of a setup sandbox's plan, what says how it reaches the network: its egress and mounts. */
export interface SetupSandboxPlan {
  sandbox: { spec?: Pick<SandboxSpec, "egress" | "mounts"> | undefined };
}

/** What a setup phase needs of a runner: its sandbox for a request, and removing that again. */
export interface SetupSandboxes {
  acquireSandbox(request: {
    agentId?: string | undefined;
    sessionKey?: string | undefined;
    phaseAllowHosts?: readonly string[] | undefined;
    carryShare?: string | undefined;
    signal?: AbortSignal | undefined;
    onProgress?: ProvideSandboxOptions["onProgress"];
    onEgress?: ProvideSandboxOptions["onEgress"];
  }): Promise<{
    lease: SandboxLease;
    /** The sandbox's plan, when the runner has one: its egress and mounts. */
    plan?: SetupSandboxPlan | undefined;
  }>;
  discardSandbox(
    request: { agentId?: string | undefined; sessionKey?: string | undefined },
    options: { keepWorkspace?: boolean },
  ): Promise<void>;
}

export interface SetupPhaseOptions {
  runner: SetupSandboxes;
  setup: SetupPhase;
  agentId?: string | undefined;
  /** Default: the agent's main session. */
  sessionKey?: string | undefined;
  /** The run's carry share key, when its sandboxes copy carried trees once (PlanRequest). */
  carryShare?: string | undefined;
  /** Limit of the setup command. */
  timeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
  onEgress?: ((decision: EgressDecision) => void) | undefined;
  onProgress?: ((message: string) => void) | undefined;
}

const outputTailBytes = 12 * 1024;

/** How long a failed setup waits for the proxy's log to deliver a refusal. */
const egressLogGraceMs = 2_000;

async function until(done: () => boolean, withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!done() && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Runs the setup command in the session's sandbox under the setup's own allowlist, then removes
 * that container — keeping the private workspace with what setup wrote — so the next acquire of
 * the session makes a fresh container under the run's own egress policy (none by default).
 *
 * Why a new container rather than switching the running one (reconnecting networks, or a proxy
 * whose allowlist changes per phase): whatever the setup started — a daemon a postinstall script
 * left behind, a tunnel already open through the proxy — would keep the setup's network into the
 * agent phase. Removing the container ends every process in it; only files carry over. It costs
 * one container start.
 */
export async function runSetupPhase(options: SetupPhaseOptions): Promise<SetupRun> {
  const { runner, setup } = options;
  const request = {
    agentId: options.agentId,
    sessionKey: options.sessionKey,
    phaseAllowHosts: setup.allowHosts,
    carryShare: options.carryShare,
  };
  const refused = new Set<string>();
  const held = await runner.acquireSandbox({
    ...request,
    signal: options.signal,
    onProgress: (progress) => options.onProgress?.(progress.message),
    onEgress: (decision) => {
      if (!decision.allowed) refused.add(decision.host);
      options.onEgress?.(decision);
    },
  });
  try {
    const result = await held.lease.sandbox.exec(`{ ${setup.command}\n} 2>&1`, {
      timeoutMs: options.timeoutMs,
      signal: options.signal,
    });
    const output = result.stdout;
    // The proxy's decisions arrive by following its log, a moment after the command saw them: a
    // failed setup waits briefly for the refusal that likely explains it (seen missing once in CI).
    if (result.exitCode !== 0) await until(() => refused.size > 0, egressLogGraceMs);
    const tlsInspection =
      result.exitCode !== 0 && refused.size === 0 ? await inspectedTls(held.plan) : undefined;
    return {
      command: setup.command,
      exitCode: result.exitCode,
      timedOut: result.timedOut,
      outputTail:
        output.length <= outputTailBytes
          ? output
          : `…(earlier output cut)…\n${output.slice(-outputTailBytes)}`,
      durationMs: result.durationMs,
      refused: [...refused].sort(),
      tlsInspection,
      offline: setup.allowHosts.length === 0 && !held.plan?.sandbox.spec?.egress,
    };
  } finally {
    await held.lease.release();
    await runner.discardSandbox(request, { keepWorkspace: true });
  }
}

/** The allowed hosts a diagnosis looks at: a wildcard names no host to ask. */
const probedHostsAtMost = 3;

/**
 * Whether an allowed host's HTTPS is re-signed by a CA only this host trusts, for a sandbox that
 * does not mount the host's bundle (with it mounted, such a CA is trusted and not the cause).
 */
export async function inspectedTls(
  plan: SetupSandboxPlan | undefined,
  detect: typeof detectTlsInspection = detectTlsInspection,
): Promise<TlsInspection | undefined> {
  const spec = plan?.sandbox.spec;
  if (!spec?.egress || spec.mounts.some((mount) => mount.role === "ca-certificates")) {
    return undefined;
  }
  const hosts = spec.egress.allow
    .filter((host) => !host.startsWith("*."))
    .slice(0, probedHostsAtMost);
  const found = await Promise.all(
    hosts.map((host) => detect(host, { bundleCandidates: hostCaBundleCandidates })),
  );
  return found.find((inspection) => inspection !== undefined);
}

/** Output lines shown whole; longer output keeps its first and last lines. */
const shownOutputLines = 20;
const shownFirstLines = 5;

/**
 * One sentence on a failed setup, and its output. With `withFix` (a result's message, which has
 * no separate fix line) the sentence names the fix; an error that carries the fix says it once.
 */
export function setupFailureMessage(run: SetupRun, options: { withFix?: boolean } = {}): string {
  const how = run.timedOut ? "timed out" : `failed (exit ${run.exitCode ?? "none: killed"})`;
  const fix = options.withFix === false ? "" : ` ${setupFailureFix(run)}.`;
  return `The setup command \`${run.command}\` ${how}.${fix}\n${outputExcerpt(run.outputTail)}`;
}

/**
 * The lines of a failed command's output worth reading: all of a short one; of a long one the
 * first lines too, not only the last — npm says what went wrong first and its usage after.
 */
function outputExcerpt(output: string): string {
  const lines = output.trimEnd().split("\n");
  if (lines.length <= shownOutputLines) return lines.join("\n");
  const last = shownOutputLines - shownFirstLines;
  const cut = lines.length - shownOutputLines;
  return [...lines.slice(0, shownFirstLines), `…(${cut} lines)…`, ...lines.slice(-last)].join("\n");
}

/** What to change after a failed setup: a refused host, an inspected network, else the command. */
export function setupFailureFix(run: SetupRun): string {
  if (run.refused.length) {
    return `The egress proxy refused ${run.refused.join(", ")}: allow what it needs with ${run.refused.map((host) => `--setup-allow-host ${host}`).join(" ")}`;
  }
  if (run.tlsInspection) {
    const { host, issuer, bundle } = run.tlsInspection;
    return `This network re-signs HTTPS to ${host} with its own CA ("${issuer}"), which this host trusts (${bundle}) and the sandbox does not: let the sandbox trust the host's CA bundle with { agents: { defaults: { sandbox: { egress: { trustHostCertificates: true } } } } } in your cordon.json5 (docs/network.md, "Behind a TLS-inspecting proxy")`;
  }
  const fetching = run.offline ? registriesOf(run.command) : [];
  if (fetching.length > 0) {
    const hosts = [...new Set(fetching.flatMap((registry) => registry.hosts))];
    const tools = fetching.map((registry) => `\`${registry.tool}\``);
    // Said as a condition: a setup fails offline for other reasons too (a missing lockfile).
    return `It ran with no network: if it failed fetching, ${tools.join(" and ")} ${tools.length > 1 ? "fetch" : "fetches"} from ${hosts.join(", ")}, so allow ${hosts.length > 1 ? "them" : "it"} with ${hosts.map((host) => `--setup-allow-host ${host}`).join(" ")}`;
  }
  return "Fix the command, or allow the hosts it needs with --setup-allow-host";
}

/**
 * A run's setup phase (`RunRequest.setup`, `cordon run --setup-cmd`), run by the orchestrator
 * under the run's session lock before the agent's sandbox is acquired: its start and its egress
 * are run events; a setup that fails throws an `EnvironmentError` (status `setup_failed`, exit 9,
 * as in fix-tests: the environment cannot be prepared, the code is not at fault).
 */
export async function setupBeforeRun(
  options: Omit<SetupPhaseOptions, "onEgress" | "onProgress"> & {
    emit: (event: RunnerEvent) => void;
  },
): Promise<void> {
  const { emit, ...phase } = options;
  emit({ type: "setup-start", command: phase.setup.command });
  const run = await runSetupPhase({
    ...phase,
    onEgress: ({ host, port, allowed }) =>
      emit({ type: "egress", host, port, allowed, phase: "setup" }),
  });
  if (run.exitCode !== 0) {
    await leaveRunSandbox(phase);
    throw new EnvironmentError(setupFailureMessage(run, { withFix: false }), {
      fix: lowerFirst(setupFailureFix(run)),
    });
  }
}

/**
 * After a failed setup, the session gets the container a run leaves (the run's own policy, on the
 * copy as setup left it), as it would have after the agent phase: otherwise its copy is left with
 * no container, which `cordon diff`, `exec` and `sandbox list` take for a sandbox removed outside
 * cordon. The setup's failure is what the user must hear: a failure here only leaves the copy as
 * it was, which the next run (or `sandbox prune`) picks up.
 */
async function leaveRunSandbox(phase: SetupPhaseOptions): Promise<void> {
  const request = {
    agentId: phase.agentId,
    sessionKey: phase.sessionKey,
    carryShare: phase.carryShare,
    signal: phase.signal,
  };
  await phase.runner.acquireSandbox(request).then(
    (held) => held.lease.release(),
    () => undefined,
  );
}

function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1);
}
