import path from "node:path";

import { parseByteSize } from "./byte-size.js";
import { formatConfigPath } from "./issues.js";
import { isPlainObject, type PlainObject } from "./merge.js";
import { configDefaults } from "./schema.js";

/**
 * Which config keys an untrusted file may set (DESIGN.md §10). A `cordon.json5` found in the
 * working directory came with the repository, so it is written by whoever wrote the repository:
 * it may tighten isolation but nothing that loosens it, or that sends data or credentials
 * elsewhere, until the user runs `cordon config trust`.
 *
 * Every key of the schema is classified here, in ONE table (a test walks the schema and fails on
 * a key that is missing). Keys are written relative to where they appear: `sandbox.docker.network`
 * stands for `agents.defaults.sandbox.docker.network` and `agents.list[*].sandbox.docker.network`;
 * `tools.deny` for the top-level `tools.deny` and every agent's own.
 */

/** What a rule needs to judge host paths: where the file is, and how `~` and links resolve. */
export interface LooseningContext {
  /** Directory of the config file; relative paths in it resolve against this. */
  directory: string;
  homeDir: string;
  /** `realpath` that also works for paths that do not exist yet (host-paths.ts). */
  realpath: (target: string) => string;
}

interface KeyRule {
  /**
   * Safe keys: why an untrusted file may set them. Loosening keys: what the loosening value opens,
   * said to the user in the refusal.
   */
  reason: string;
  /** True when this value loosens isolation; `never` for safe keys. */
  loosens: (value: unknown, context: LooseningContext) => boolean;
}

const never = (): boolean => false;
const always = (): boolean => true;
const unless =
  (...allowed: readonly unknown[]) =>
  (value: unknown): boolean =>
    !allowed.includes(value);
const nonEmpty = (value: unknown): boolean =>
  Array.isArray(value) ? value.length > 0 : value !== undefined;
const isTrue = (value: unknown): boolean => value === true;
/** A limit may go down, not up: above the built-in default it gives the sandbox more of the host. */
const above =
  (limit: number) =>
  (value: unknown): boolean =>
    typeof value !== "number" || value > limit;
const bytesAbove =
  (limit: string | number) =>
  (value: unknown): boolean => {
    const bytes =
      typeof value === "string" || typeof value === "number" ? parseByteSize(value) : undefined;
    const ceiling = parseByteSize(limit) ?? 0;
    return bytes === undefined || bytes > ceiling;
  };

const safe = (reason: string): KeyRule => ({ reason, loosens: never });
const loosening = (reason: string, loosens: KeyRule["loosens"] = always): KeyRule => ({
  reason,
  loosens,
});

/** `auto`, or a uid (and gid) that is not root's. Names are out: an image may map any name to 0. */
function isNonRootUser(value: unknown): boolean {
  return value === "auto" || (typeof value === "string" && /^[1-9]\d*(:[1-9]\d*)?$/.test(value));
}

/** The workspace may be the config file's directory or below it, links resolved. */
function workspaceLeavesDirectory(value: unknown, context: LooseningContext): boolean {
  if (typeof value !== "string") return true;
  const resolved =
    value === "~" || value.startsWith("~/")
      ? path.join(context.homeDir, value.slice(1))
      : path.resolve(context.directory, value);
  const root = context.realpath(context.directory);
  const relative = path.relative(root, context.realpath(resolved));
  return relative.startsWith("..") || path.isAbsolute(relative);
}

const docker = configDefaults.docker;
const diskBudgetDefault = configDefaults.sandbox.disk;

export const untrustedKeyRules: Readonly<Record<string, KeyRule>> = {
  $schema: safe("an editor hint; cordon never fetches it"),
  // A model name is safe: the endpoint and the keys come only from the environment. Which
  // variables hold keys is not: a file naming GITHUB_TOKEN would send it to the model API.
  model: loosening(
    "model.apiKeyEnv chooses which of your environment variables are sent to the model API as keys",
    (value) => isPlainObject(value) && value["apiKeyEnv"] !== undefined,
  ),
  "fixTests.protect": safe(
    "adds files fix-tests keeps the agent from changing; it can only make verification stricter",
  ),
  id: safe("names an agent"),
  promptMode: safe(
    "changes what the model is told; the sandbox and the tool policy hold whatever it is told",
  ),
  "bootstrap.files": safe(
    "names workspace files read through the sandbox into the prompt; the agent can read them anyway",
  ),
  "bootstrap.maxBytes": safe("how much of each bootstrap file the prompt holds"),
  default: safe("picks which agent runs; its settings are checked like every other"),
  name: safe("a display name"),
  contextWindow: safe(
    "when the session is compacted; a wrong value only compacts early or fails at the API",
  ),
  thinking: safe(
    "how much the model thinks (tokens it spends); it opens no way out of the sandbox",
  ),
  workspace: loosening(
    "points the agent at host files outside the directory the file came with",
    workspaceLeavesDirectory,
  ),
  runtime: loosening(
    'anything but "cordon" runs another agent program in the sandbox, and "claude-code" sends its model calls, with your key added, to the API',
    unless("cordon"),
  ),

  // A subagent runs with its own agent's settings: naming another agent may pick one whose
  // sandbox is weaker, tools wider or workspace elsewhere. Only the user's file may name them.
  "subagents.allowAgents": loosening(
    "lets an agent start sessions of other agents, each with that agent's own tools, sandbox and workspace",
    nonEmpty,
  ),
  "subagents.model": safe(
    "which model a subagent calls; the endpoint and keys stay the environment's",
  ),
  "subagents.maxConcurrent": loosening(
    `more than the built-in ${configDefaults.subagents.maxConcurrent} child runs at once takes more of the host (containers, model spend)`,
    above(configDefaults.subagents.maxConcurrent),
  ),
  "tools.agentToAgent.enabled": loosening(
    "lets a session's tools read and message sessions of other agents",
    isTrue,
  ),
  "tools.agentToAgent.allow": loosening(
    "names the agents whose sessions may be read and messaged",
    nonEmpty,
  ),

  "tools.profile": loosening(
    '"full" offers every registered tool, an embedder\'s own host-side tools included',
    unless("minimal", "coding"),
  ),
  "tools.allow": safe("narrows the tools the profile offers"),
  "tools.alsoAllow": loosening("adds tools the profile leaves out", nonEmpty),
  "tools.deny": safe("removes tools"),
  "tools.sandbox.tools.allow": safe("narrows the tools of sandboxed sessions"),
  "tools.sandbox.tools.alsoAllow": loosening(
    "adds tools the profile leaves out to sandboxed sessions",
    nonEmpty,
  ),
  "tools.sandbox.tools.deny": safe("removes tools from sandboxed sessions"),
  "tools.exec.timeoutSec": loosening(
    `lets a command run longer than the built-in ${configDefaults.tools.execTimeoutSec} s`,
    above(configDefaults.tools.execTimeoutSec),
  ),
  "tools.callTimeoutSec": loosening(
    `lets one tool call run longer than the built-in ${configDefaults.tools.callTimeoutSec} s`,
    above(configDefaults.tools.callTimeoutSec),
  ),
  "tools.exec.maxOutputBytes": safe(
    "how much command output the model sees; it opens no way out of the sandbox",
  ),

  "sandbox.mode": loosening(
    'anything but "all" runs some sessions on the host, outside the sandbox',
    unless("all"),
  ),
  "sandbox.scope": loosening(
    'anything but "session" lets sessions share a container and what one leaves behind',
    unless("session"),
  ),
  "sandbox.workspaceAccess": loosening(
    'anything but "none" mounts your real workspace (its .git/config credentials included) instead of a cleaned copy',
    unless("none"),
  ),
  "sandbox.seed": safe("false only leaves the private workspace empty"),
  "sandbox.disk": loosening(
    `a budget above the built-in ${String(diskBudgetDefault)}, or none, lets the sandbox fill more of the host's disk`,
    bytesAbove(diskBudgetDefault),
  ),
  // Seeding leaves ignored files out because that is where secrets live (.env, .npmrc with a
  // token, a virtualenv's pip.conf). A file that names them brings host files into the sandbox,
  // where the agent (and so the model) can read them: what the user carries is the user's call.
  "sandbox.carry": loosening(
    "copies git-ignored files of your workspace (where secrets like .env live) into the sandbox, where the agent can read them",
    nonEmpty,
  ),
  // Seeding leaves secret-shaped files out (.env, keys, .ssh, tokens in .npmrc): a repository's
  // own config must not be able to name them back in for the agent to read.
  "sandbox.seedInclude": loosening(
    "copies secret-shaped files of your workspace (.env, private keys, token files) into the sandbox, where the agent can read them",
    nonEmpty,
  ),
  "sandbox.protectGitDir": loosening(
    "false lets an agent with rw access write your repository's .git (hooks and config you run later)",
    unless(true),
  ),
  "sandbox.workspaceRoot": loosening("moves where cordon writes private workspaces on the host"),
  "sandbox.workspaceStorage": safe(
    "where the private copy lives (this host's disk or a volume on the engine); the sandbox sees the same copy either way",
  ),
  "sandbox.checkpoints": safe(
    "when cordon records the private copy's state, in its own directory; it opens nothing to the sandbox",
  ),
  "sandbox.sessionToolsVisibility": loosening(
    '"all" lets a sandboxed session read and message every session of the project, the unsandboxed main session included',
    unless("spawned"),
  ),
  "sandbox.prune.stopIdleMinutes": safe(
    "when idle containers are stopped; not what they can reach",
  ),
  "sandbox.prune.idleHours": safe("when idle containers are removed; not what they can reach"),
  "sandbox.prune.maxAgeDays": safe("when old containers are removed; not what they can reach"),
  "sandbox.pool.size": loosening(
    "keeps this many started containers, each with a copy of the workspace, on the host between runs",
    unless(0),
  ),

  "sandbox.egress.allow": loosening(
    "lets the sandbox reach these hosts through the egress proxy, and send your code there",
    nonEmpty,
  ),
  "sandbox.egress.trustHostCertificates": safe(
    "mounts the host's public CA certificates read-only; it opens no route out of the sandbox",
  ),

  "sandbox.docker.image": loosening(
    "runs the sandbox from another local image, which may hold credentials or run as root",
  ),
  // Building is running the repository's code on this machine with network access (Docker's
  // default bridge), outside the sandbox's hardening: only a file the user trusts may ask for it.
  "sandbox.docker.dockerfile": loosening(
    "builds an image from a Dockerfile in the workspace: the build runs the repository's code on your machine with network access",
  ),
  "sandbox.docker.devcontainer": loosening(
    "builds an image from a devcontainer.json in the workspace: the build runs the repository's code on your machine with network access",
  ),
  "sandbox.docker.containerPrefix": safe(
    "names containers; cordon adopts only containers labelled with its own state directory",
  ),
  "sandbox.docker.executor": safe(
    "how cordon reaches the container; either way commands run as the same user under the same limits",
  ),
  "sandbox.docker.workdir": safe(
    "a path inside the container; the policy refuses /, /proc, /sys, /dev and overlaps",
  ),
  "sandbox.docker.readOnlyRoot": loosening(
    "false makes the container's root filesystem writable",
    unless(true),
  ),
  "sandbox.docker.tmpfs": safe(
    "memory-backed mounts inside the container, charged to its memory limit",
  ),
  "sandbox.docker.network": loosening(
    'anything but "none" lets the sandbox reach the network, and send your code there',
    unless("none"),
  ),
  "sandbox.docker.user": loosening(
    'anything but "auto" or a non-zero uid[:gid] may run the sandbox as root',
    (value) => !isNonRootUser(value),
  ),
  "sandbox.docker.capDrop": loosening(
    'without "ALL" the container keeps Linux capabilities',
    (value) =>
      !Array.isArray(value) ||
      !value.some((cap) => typeof cap === "string" && cap.toUpperCase() === "ALL"),
  ),
  "sandbox.docker.env": safe(
    "literal values set inside the sandbox; nothing is taken from the host environment",
  ),
  "sandbox.docker.memory": loosening(
    `more memory than the built-in ${String(docker.memory)} takes it from the host`,
    bytesAbove(docker.memory),
  ),
  "sandbox.docker.memorySwap": loosening(
    `more memory and swap than the built-in ${String(docker.memory)} takes it from the host`,
    bytesAbove(docker.memory),
  ),
  "sandbox.docker.cpus": loosening(
    `more than the built-in ${docker.cpus} CPU takes it from the host`,
    above(docker.cpus),
  ),
  "sandbox.docker.pidsLimit": loosening(
    `more than the built-in ${docker.pidsLimit} processes takes them from the host`,
    above(docker.pidsLimit),
  ),
  "sandbox.docker.ulimits": loosening(
    "may raise the engine's own resource limits",
    (value) => !isPlainObject(value) || Object.keys(value).length > 0,
  ),
  "sandbox.docker.seccompProfile": loosening(
    "replaces the system-call filter the sandbox runs under",
  ),
  "sandbox.docker.apparmorProfile": loosening(
    "replaces the AppArmor profile the sandbox runs under",
  ),
  "sandbox.docker.dns": loosening(
    "chooses which servers the sandbox's name lookups reach",
    nonEmpty,
  ),
  "sandbox.docker.extraHosts": loosening(
    "points names at addresses of the file's choosing (host-gateway reaches the host)",
    nonEmpty,
  ),
  "sandbox.docker.binds": loosening("mounts host paths into the sandbox", nonEmpty),
  "sandbox.docker.bindRoots": loosening("widens which host paths may be mounted", nonEmpty),
  "sandbox.docker.runtime": loosening("replaces the container runtime the sandbox runs under"),
  "sandbox.docker.dangerouslyAllowHostNetwork": loosening(
    "lets the sandbox share the host's network",
    isTrue,
  ),
  "sandbox.docker.dangerouslyAllowContainerNamespaceJoin": loosening(
    "lets the sandbox join another container's namespaces",
    isTrue,
  ),
  "sandbox.docker.dangerouslyAllowUnconfined": loosening(
    "lets the sandbox run without seccomp or AppArmor",
    isTrue,
  ),
  "sandbox.docker.dangerouslyAllowExternalBindSources": loosening(
    "lets binds mount host paths outside the allowed roots",
    isTrue,
  ),
  "sandbox.docker.dangerouslyAllowEnvNames": loosening(
    "passes credential-like variables into the sandbox",
    nonEmpty,
  ),
};

/** One key an untrusted file sets that loosens isolation. */
export interface LooseningKey {
  /** Where it is in the file: `agents.list[1].sandbox.docker.network`. */
  path: string;
  value: unknown;
  /** What the value opens (or that the key is unclassified). */
  reason: string;
}

/**
 * The key a path is classified under: `agents.defaults.` and `agents.list[n].` are dropped, so an
 * agent's `sandbox.mode` and the defaults' share one rule.
 */
export function ruleKeyOf(at: readonly PropertyKey[]): string {
  const [first, second] = at;
  const relative =
    first !== "agents"
      ? at
      : second === "defaults"
        ? at.slice(2)
        : second === "list"
          ? at.slice(3)
          : at;
  return relative.map(String).join(".");
}

/**
 * Every key of an (already schema-checked) file layer that loosens isolation. A key the table
 * does not know is reported too: what nobody classified is refused, never let through.
 */
export function looseningKeys(layer: PlainObject, context: LooseningContext): LooseningKey[] {
  const found: LooseningKey[] = [];
  const visit = (value: unknown, at: readonly PropertyKey[]): void => {
    if (value === undefined) return;
    const key = ruleKeyOf(at);
    // Own keys only: a key named "constructor" must not find Object.prototype's.
    const rule = Object.hasOwn(untrustedKeyRules, key) ? untrustedKeyRules[key] : undefined;
    const agentList = at.length === 2 && at[0] === "agents" && at[1] === "list";
    if (rule) {
      if (rule.loosens(value, context)) {
        found.push({ path: formatConfigPath(at), value, reason: rule.reason });
      }
    } else if (agentList && Array.isArray(value)) {
      value.forEach((entry, index) => visit(entry, [...at, index]));
    } else if (isPlainObject(value)) {
      for (const [name, child] of Object.entries(value)) visit(child, [...at, name]);
    } else {
      found.push({
        path: formatConfigPath(at),
        value,
        reason: "no rule says an untrusted file may set this key",
      });
    }
  };
  visit(layer, []);
  return found;
}
