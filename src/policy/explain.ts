import { formatByteSize } from "../config/index.js";
import { gvisorBoundaryNote, isGvisorRuntime } from "../sandbox/docker/gvisor.js";
import { poolShape, unpoolableReason } from "../sandbox/docker/pool/pool-shape.js";
import type { SandboxSpec } from "../sandbox/index.js";
import { describeRuntime } from "./agent-runtime.js";
import { describeLimits } from "./run-limits.js";
import { bootstrapFilesFor } from "./bootstrap-files.js";
import type { RunPlan } from "./plan-run.js";
import { credentialLikeName } from "./sandbox-env.js";

/**
 * The plan as text for `cordon sandbox explain`: every line is derived from the plan object the
 * runner uses, never recomputed, so what is shown is what runs.
 */
export function explainPlan(plan: RunPlan): string {
  const lines: string[] = [];
  const { agent, sandbox, tools } = plan;
  const written = agent.writtenId !== undefined ? ` (written "${agent.writtenId}")` : "";
  lines.push(`agent     ${agent.id}${written}${agent.name ? ` (${agent.name})` : ""}`);
  lines.push(`session   ${plan.sessionKey}`);
  lines.push(`workspace ${agent.workspace}`);
  lines.push(
    `model     ${agent.model.primary}${agent.model.fallbacks.length ? ` (fallbacks: ${agent.model.fallbacks.join(", ")})` : ""}`,
  );
  lines.push(`prompt    ${describePrompt(plan)} (${agent.promptModeKey})`);
  lines.push(`runtime   ${describeRuntime(agent.runtime)}`);
  lines.push("");
  lines.push(`sandbox   ${sandbox.enabled ? "yes" : "NO"} — ${sandbox.reason}`);
  lines.push(
    `  mode ${sandbox.mode} (${sandbox.keys.mode}), scope ${sandbox.scope} (${sandbox.keys.scope}), workspace access ${sandbox.workspaceAccess} (${sandbox.keys.workspaceAccess})`,
  );
  for (const line of sandbox.explanation.slice(1)) lines.push(`  ${line}`);
  lines.push(`  change: ${changeHint(plan, ["mode", "scope", "workspaceAccess"])}`);

  const spec = sandbox.spec;
  if (spec) {
    const d = spec.docker;
    lines.push("");
    lines.push(`container ${spec.containerName}`);
    lines.push(`  scope key    ${spec.scopeKey}`);
    lines.push(`  project      ${spec.agentWorkspace} (hashed into the scope key after "@")`);
    lines.push(`  config hash  ${spec.configHash}`);
    lines.push(`  image        ${describeImage(d)}`);
    lines.push(`  user         ${d.user} (init and keep-alive: ${d.initUser})`);
    lines.push(`  workdir      ${d.workdir}`);
    lines.push(
      `  network      ${d.network}${d.network === "none" ? " (loopback only; /etc/hosts written by cordon into a volume on the engine, mounted read-only)" : ""}`,
    );
    lines.push(`  root fs      ${d.readOnlyRoot ? "read-only" : "WRITABLE"}`);
    lines.push(`  capDrop      ${d.capDrop.join(", ") || "(none)"}`);
    lines.push(
      `  limits       memory ${formatByteSize(d.memoryBytes)}, memory+swap ${formatByteSize(d.memorySwapBytes)}, cpus ${d.cpus}, pids ${d.pidsLimit}`,
    );
    if (d.ulimits.length) {
      lines.push(
        `  ulimits      ${d.ulimits.map((u) => `${u.name}=${u.soft}:${u.hard}`).join(", ")}`,
      );
    }
    if (d.runtime) {
      const gvisor = isGvisorRuntime(d.runtime);
      lines.push(`  runtime      ${d.runtime}${gvisor ? ` (${gvisorBoundaryNote})` : ""}`);
      if (gvisor) {
        lines.push(
          `               pids limit ${d.pidsLimit} is RLIMIT_NPROC inside gVisor; cordon help gvisor`,
        );
      }
    }
    if (d.executor === "resident") {
      lines.push(
        "  executor     resident: cordon's executor in a volume on the engine, mounted read-only at /.cordon, one exec for the session",
      );
    } else if (d.executor === "exec") {
      lines.push("  executor     exec: one Docker exec per call");
    }
    if (d.seccompProfile) lines.push(`  seccomp      ${d.seccompProfile}`);
    if (d.apparmorProfile) lines.push(`  apparmor     ${d.apparmorProfile}`);
    if (d.dns.length) lines.push(`  dns          ${d.dns.join(", ")}`);
    if (d.extraHosts.length) lines.push(`  extra hosts  ${d.extraHosts.join(", ")}`);
    const env = Object.keys(d.env);
    lines.push(`  env          ${env.length ? env.join(", ") : "(none: no host environment)"}`);
    lines.push(
      `  tmpfs        ${
        Object.entries(d.tmpfs)
          .map(([t, o]) => `${t} (${o})`)
          .join(", ") || "(none)"
      }`,
    );
    lines.push("  mounts");
    // Columns as wide as their longest entry: one long target must not shift the rest.
    const targetWidth = Math.max(14, ...spec.mounts.map((m) => m.target.length));
    for (const m of spec.mounts) {
      lines.push(
        `    ${m.target.padEnd(targetWidth)} ← ${m.source}  ${m.readOnly ? "ro" : "rw"}  [${m.role}]`,
      );
    }
    if (spec.privateWorkspace) {
      lines.push(
        `  private workspace ${spec.privateWorkspace}${spec.seed ? " (seeded with a copy of the agent workspace)" : ""}`,
      );
      lines.push(`  storage      ${describeStorage(spec.workspaceStorage)}`);
      lines.push(`  disk         ${describeDisk(spec)}`);
    }
    const prune = sandbox.prune;
    lines.push(
      `  prune        stop when idle ${prune.stopIdleMs ? `${prune.stopIdleMs / 60_000} min` : "never"}, remove when idle ${prune.idleMs ? `${prune.idleMs / 3_600_000} h` : "never"}, max age ${prune.maxAgeMs ? `${prune.maxAgeMs / 86_400_000} d` : "never"}`,
    );
    lines.push(`  pool         ${describePool(spec, sandbox.pool.size)}`);
  }

  lines.push("");
  lines.push(`tools     profile ${tools.profile}; allowed: ${tools.allowed.join(", ")}`);
  // Columns as wide as their longest entry (a custom or session tool's name is long).
  const toolWidth = Math.max(12, ...tools.decisions.map((d) => d.tool.length));
  const layerWidth = Math.max(13, ...tools.decisions.map((d) => d.layer.length));
  for (const d of tools.decisions) {
    const mark = d.allowed ? "allow" : "deny ";
    lines.push(
      `  ${mark} ${d.tool.padEnd(toolWidth)} ${d.layer.padEnd(layerWidth)} ${d.configKey}: ${d.reason}`,
    );
    const others = (d.blockedBy ?? []).slice(1);
    for (const b of others)
      lines.push(`        ${"".padEnd(toolWidth)} also ${b.layer}: ${b.configKey}: ${b.reason}`);
  }
  lines.push(
    `  exec timeout ${tools.exec.timeoutSec} s${tools.exec.maxOutputBytes ? `, output cap ${formatByteSize(tools.exec.maxOutputBytes)}` : ""}`,
  );

  lines.push("");
  lines.push("limits");
  lines.push(...describeLimits(plan.limits));

  lines.push("");
  lines.push(...describeSubagents(plan));

  if (plan.warnings.length) {
    lines.push("");
    lines.push("warnings");
    for (const w of plan.warnings) lines.push(`  ! ${w}`);
  }
  return `${lines.join("\n")}\n`;
}

/** The keys that decide the sandbox settings, plus where to set them for this agent alone. */
function changeHint(plan: RunPlan, fields: readonly (keyof RunPlan["sandbox"]["keys"])[]): string {
  const keys = fields.map((field) => plan.sandbox.keys[field]);
  const agentOwn = plan.agent.configKey.startsWith("agents.list[");
  const inherited = keys.some((key) => key.startsWith("agents.defaults."));
  return `${keys.join(", ")}${agentOwn && inherited ? ` (or ${plan.agent.configKey}.sandbox.<key> for this agent only)` : ""}`;
}

/** Shown in place of a credential-like environment value. */
export const redactedValue = "<redacted>";

/**
 * The plan with the values of credential-like environment variables (the ones only
 * `dangerouslyAllowEnvNames` lets through) replaced, for printing: `explain --json` must not put
 * a token on a terminal or in a CI log. Everything else is the plan as is.
 */
export function redactPlanSecrets(plan: RunPlan): RunPlan {
  const spec = plan.sandbox.spec;
  if (!spec) return plan;
  const env = Object.fromEntries(
    Object.entries(spec.docker.env).map(([name, value]) => [
      name,
      credentialLikeName(name) ? redactedValue : value,
    ]),
  );
  return {
    ...plan,
    sandbox: { ...plan.sandbox, spec: { ...spec, docker: { ...spec.docker, env } } },
  };
}

/**
 * Whom this session may spawn and where those children run, which sessions its session tools
 * see, and whether other agents' sessions are reachable: the subagent policy, with its keys.
 */
function describeSubagents(plan: RunPlan): string[] {
  const sub = plan.subagents;
  const offered = ["sessions_spawn", "sessions_send", "sessions_list", "sessions_history"].filter(
    (tool) => plan.tools.allowed.includes(tool),
  );
  const lines = [
    `subagents ${offered.length > 0 ? `session tools allowed: ${offered.join(", ")}` : "no session tool allowed (add group:sessions to tools.alsoAllow)"}`,
  ];
  if (sub.isSubagentSession) {
    lines.push("  this is a subagent's session: it cannot spawn (one level only)");
  } else {
    const targets = sub.targets.map((t) => {
      const where = t.sandboxed
        ? `sandboxed (${t.modeKey} "${t.mode}")`
        : `NOT sandboxed (${t.modeKey} "off")`;
      return `${t.agentId}: ${where}${t.refusedFromSandbox ? ", refused from this sandboxed session" : ""}`;
    });
    lines.push(
      `  may spawn ${sub.allowAgents.join(", ") || "(none)"} (${sub.allowAgentsKey}); each child in its own session agent:<id>:sub:<run>`,
    );
    for (const target of targets) lines.push(`    ${target}`);
    lines.push(
      `  child runs share a lane of ${sub.maxConcurrent} (agents.defaults.subagents.maxConcurrent)${sub.model ? `; model ${sub.model} unless the spawn names one` : ""}`,
    );
  }
  lines.push(
    plan.sandbox.enabled
      ? sub.visibility === "spawned"
        ? `  session tools see only the subagents this session spawned (${sub.visibilityKey} "spawned")`
        : `  session tools see every session of the project (${sub.visibilityKey} "all")`
      : `  session tools see every session of the project (not sandboxed; ${sub.visibilityKey} applies to sandboxed sessions)`,
  );
  const a2a = sub.agentToAgent;
  lines.push(
    a2a.enabled
      ? `  other agents' sessions: reachable for ${a2a.allow.join(", ") || "none"} (tools.agentToAgent.allow)`
      : "  other agents' sessions: off limits, but for its own subagents (tools.agentToAgent.enabled false)",
  );
  return lines;
}

/** The prompt mode and the workspace files it reads (through the sandbox), each capped. */
function describePrompt(plan: RunPlan): string {
  const { promptMode, bootstrap } = plan.agent;
  const files = bootstrapFilesFor(promptMode, bootstrap.files);
  return files.length > 0
    ? `${promptMode}; workspace files ${files.join(", ")} (read in the sandbox, ${formatByteSize(bootstrap.maxBytes)} each at most)`
    : `${promptMode}; no workspace files`;
}

/** Which image the container runs, and who asked for it. */
function describeImage(docker: NonNullable<RunPlan["sandbox"]["spec"]>["docker"]): string {
  const image = docker.image;
  switch (image.source) {
    case "config":
      return image.reference;
    case "project":
      return `project image cordon-project-<slug>:<hash>, built from ${image.project.file} (${image.project.configKey}; cordon help images)`;
    case "runtime":
      return `${image.runtime} agent image cordon-agent-${image.runtime}:<hash>, built when missing (the run's runtime; cordon help runtimes)`;
    case "builtin":
      return "built-in sandbox image (cordon image build)";
  }
}

/** The warm pool line: its size and shape, or why this sandbox is made without it. */
function describePool(spec: SandboxSpec, size: number): string {
  // The default is no pool: why, with the figures, is in docs/pool.md ("The default").
  if (size <= 0) {
    return 'none (sandbox.pool.size 0, the default): a new session creates and starts its own container; a pool of 1 keeps one started per shape: a new session reaches its first command about 2x sooner in a one-shot run, 3-4x in a long-lived process (docs/pool.md, "The default")';
  }
  const reason = unpoolableReason(spec);
  if (reason) return `not used: ${reason} (docs/pool.md)`;
  const seeded = spec.seed && spec.workspaceAccess !== "rw";
  return `${size} started container${size === 1 ? "" : "s"} of shape ${poolShape(spec)} wait for new sandboxes${seeded ? "; a member's seeded copy is taken only while the workspace is unchanged since it was made" : ""}`;
}

/**
 * `sandbox.disk` in words, as it holds for where the copy lives: an ext4 image bounds a host copy
 * (where cordon may mount one: the warnings say when it cannot, and it is watched), nothing bounds
 * a Docker volume on disk, so a copy in volumes is watched.
 */
function describeDisk(spec: SandboxSpec): string {
  const storage = spec.workspaceStorage;
  if (spec.diskBytes === undefined) {
    const disk = storage === "volume" ? "the engine's disk" : "the host's disk";
    return `UNBOUNDED: the sandbox can fill ${disk} through the private workspace`;
  }
  const size = formatByteSize(spec.diskBytes);
  const image = "an ext4 image; past it, writes fail with ENOSPC";
  const watched =
    "watched: a Docker volume cannot be bounded on disk, so cordon measures it every 10 s and stops the sandbox past the budget";
  if (storage === "volume") return `${size} for the private workspace (${watched})`;
  if (storage === "host") return `${size} for the private workspace (${image})`;
  return `${size} for the private workspace (on a local engine ${image}; on one elsewhere, in volumes, ${watched})`;
}

/** `sandbox.workspaceStorage` in words: where the private copy lives. */
function describeStorage(storage: SandboxSpec["workspaceStorage"]): string {
  if (storage === "host")
    return "this host's disk, bound into the sandbox (sandbox.workspaceStorage)";
  if (storage === "volume") {
    return "Docker volumes on the engine, seeded by streaming; nothing of the copy on this host (sandbox.workspaceStorage)";
  }
  return "auto: this host's disk on a local engine, Docker volumes on one elsewhere (sandbox.workspaceStorage)";
}
