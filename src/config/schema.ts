import { z } from "zod";

import { normalizeAgentId } from "./agent-id.js";
import {
  sandboxModes,
  sandboxScopes,
  sessionToolsVisibilities,
  checkpointModes,
  workspaceStorageModes,
  thinkingLevels,
  toolProfiles,
  workspaceAccessModes,
} from "./choices.js";

import { carryPathProblem } from "./carry-path.js";

/**
 * The zod schema of the whole config file (DESIGN.md §4, docs/configuration.md). Strict: unknown
 * keys are errors. Free of transforms on purpose, so `cordon config schema` can export it as JSON
 * Schema and `cordon config show` prints values the way a user writes them; units (bytes, hours)
 * and paths are resolved by the policy layer.
 *
 * Sections come in two flavours built from one definition: the global ones (`model`, `tools`,
 * `agents.defaults.sandbox`) carry the built-in defaults, the per-agent ones (`agents.list[]`,
 * `agents.defaults.tools`) are partial overrides without defaults, so "agent values beat defaults"
 * only applies to what an agent actually sets.
 */

export {
  sandboxModes,
  sandboxScopes,
  sessionToolsVisibilities,
  checkpointModes,
  workspaceStorageModes,
  thinkingLevels,
  toolProfiles,
  workspaceAccessModes,
} from "./choices.js";
/** How much of the system prompt an agent gets (docs/configuration.md, `promptMode`). */
export const promptModes = ["full", "minimal", "none"] as const;
/** Resource limits Docker accepts as ulimits. */
export const ulimitNames = [
  "core",
  "cpu",
  "data",
  "fsize",
  "locks",
  "memlock",
  "msgqueue",
  "nice",
  "nofile",
  "nproc",
  "rss",
  "rtprio",
  "rttime",
  "sigpending",
  "stack",
] as const;

/**
 * HOME in the sandbox: a tmpfs by default (below), given to whichever uid the sandbox runs as
 * (policy/docker-settings.ts), so HOME and the npm, pip and XDG caches under it are writable on a
 * read-only root without a passwd entry.
 */
export const sandboxHomeDirectory = "/home/sandbox";

/** The built-in defaults, in one place; docs/configuration.md lists the same values. */
export const configDefaults = {
  model: { primary: "claude-sonnet-4-6", fallbacks: [] as string[] },
  bootstrap: {
    /** Workspace files read into the system prompt, in this order (OpenClaw's set). */
    files: ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "BOOTSTRAP.md"],
    /** Most bytes of one file in the prompt; the rest is cut with a note. */
    maxBytes: 16 * 1024,
  },
  tools: { profile: "coding" as const, execTimeoutSec: 300, callTimeoutSec: 600 },
  /** The model's context window when `agents.*.contextWindow` does not say (policy/run-limits.ts). */
  contextWindowTokens: 200_000,
  sandbox: {
    mode: "all" as const,
    scope: "session" as const,
    workspaceAccess: "none" as const,
    seed: true,
    /** What the sandbox may write to its private workspace; 0 or "unlimited" = no bound. */
    disk: "10g" as string | number,
    /** Ignored paths of the workspace copied into the seeded copy (e.g. node_modules). */
    carry: [] as string[],
    /** Secret-shaped paths of the workspace seeded all the same (e.g. a test fixture's key). */
    seedInclude: [] as string[],
    protectGitDir: true,
    /** A checkpoint of a seeded copy before each turn's tools run (docs/checkpoints.md). */
    checkpoints: "turn" as const,
    /** Where a private copy lives: "auto" = this host's disk on a local engine, a volume elsewhere. */
    workspaceStorage: "auto" as const,
    prune: { stopIdleMinutes: 30, idleHours: 24, maxAgeDays: 7 },
    /** Started containers kept ready per sandbox shape (docs/pool.md); 0 = no pool. */
    pool: { size: 0 },
    egress: { allow: [] as string[], trustHostCertificates: false },
    sessionToolsVisibility: "spawned" as const,
  },
  subagents: {
    /** Child runs (sessions_spawn, sessions_send) in flight at once in one cordon process. */
    maxConcurrent: 2,
  },
  docker: {
    containerPrefix: "cordon",
    workdir: "/workspace",
    readOnlyRoot: true,
    tmpfs: {
      // exec is said outright because Docker adds noexec to a tmpfs whose options do not say
      // exec; test tools run what they build there (go test's binaries under $TMPDIR, bats stubs,
      // pytest's tmp_path scripts, native addons), and the workspace and HOME run code anyway.
      "/tmp": "rw,nosuid,nodev,exec,size=256m",
      "/var/tmp": "rw,nosuid,nodev,exec,size=64m",
      // Runtime state only (pid files, sockets): nothing there needs to run.
      "/run": "rw,nosuid,nodev,noexec,size=16m",
      // exec: npx and pip run what they cache there.
      [sandboxHomeDirectory]: "rw,nosuid,nodev,exec,size=512m",
    } as Record<string, string | null>,
    network: "none",
    user: "auto",
    capDrop: ["ALL"],
    memory: "1g" as string | number,
    cpus: 1,
    pidsLimit: 256,
    executor: "resident" as "resident" | "exec",
  },
} as const;

const noNul = (value: string) => !value.includes("\0");
const text = z.string().min(1).refine(noNul, { error: "must not contain NUL bytes" });
/** Written any way (`"Ops Team"`), used normalised (`"ops-team"`, agent-id.ts). */
const agentId = text.refine((id) => normalizeAgentId(id) !== "", {
  error: "an agent id needs at least one letter or digit",
});
/** A byte size: a number of bytes, or "512m", "1g", "1.5GiB" (k/m/g/t are powers of 1024). */
const byteSize = z.union([
  z.number().int().positive(),
  z.string().regex(/^\s*\d+(\.\d+)?\s*([kmgt]i?b?|b)?\s*$/i, {
    error: 'a size is a number of bytes or a string like "512m" or "1g"',
  }),
]);
/** A disk budget: a byte size, or 0 / "unlimited" for none. */
const diskSize = z
  .union([byteSize, z.literal(0), z.literal("unlimited")])
  .describe(
    'Bound on what the sandbox writes to its private workspace: a size like "10g", or 0 / "unlimited" for none',
  );
/** Workspace-relative paths copied into the seeded copy (`node_modules`, `.venv`). */
const carryList = z
  .array(
    text.superRefine((value, ctx) => {
      const problem = carryPathProblem(value);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    }),
  )
  .describe(
    "Git-ignored paths of the workspace (e.g. node_modules, .venv) copied into the seeded private copy: writable there, never part of a diff",
  );
/** Secret-shaped workspace paths seeded on purpose (`.env.test`, `fixtures/server.pem`). */
const seedIncludeList = z
  .array(
    text.superRefine((value, ctx) => {
      const problem = carryPathProblem(value);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    }),
  )
  .describe(
    "Secret-shaped paths of the workspace (.env*, keys, .ssh, tokens in .npmrc) copied into the seeded private copy on purpose; by default they are left out",
  );
const toolNameList = z.array(
  z
    .string()
    .min(1)
    .regex(/^[A-Za-z0-9_:*?.-]+$/, {
      error:
        "a tool entry is a name, an alias, `group:<name>` or a glob (letters, digits, _ - . : * ?)",
    }),
);

/** Turns a field into "default when absent" (global sections) or "optional" (overrides). */
type Flavour = "defaults" | "partial";
type Field<F extends Flavour, T extends z.ZodType> = F extends "defaults"
  ? z.ZodDefault<T>
  : z.ZodOptional<T>;
function field<F extends Flavour, T extends z.ZodType>(
  flavour: F,
  schema: T,
  value: z.output<T>,
): Field<F, T> {
  return (flavour === "defaults" ? schema.default(value as never) : schema.optional()) as Field<
    F,
    T
  >;
}
type Section<F extends Flavour, T extends z.ZodType> = F extends "defaults"
  ? z.ZodPrefault<T>
  : z.ZodOptional<T>;
/** A nested section: parsed from `{}` when absent (so its own defaults apply), or optional. */
function section<F extends Flavour, T extends z.ZodType>(flavour: F, schema: T): Section<F, T> {
  return (flavour === "defaults" ? schema.prefault({} as never) : schema.optional()) as Section<
    F,
    T
  >;
}

const bindObject = z.strictObject({
  source: text.describe("Absolute host path (or ~/…); must lie inside bindRoots"),
  target: text.describe("Absolute path inside the container"),
  readOnly: z
    .boolean()
    .optional()
    .describe("Mount read-only (the default: binds are read-only unless this is false)"),
});
const bind = z.union([
  text.describe('"/host/path:/container/path[:ro|rw]", read-only unless ":rw"'),
  bindObject,
]);

const ulimit = z.union([
  z.number().int().nonnegative(),
  z.strictObject({
    soft: z.number().int().nonnegative().describe("The soft limit, which processes may raise"),
    hard: z.number().int().nonnegative().describe("The hard limit, the ceiling of the soft one"),
  }),
]);

/** `sandbox.docker.dockerfile`: a path, or the path with its build context and arguments. */
const projectDockerfile = z.union([
  text.describe("Dockerfile path relative to the workspace; its directory is the build context"),
  z.strictObject({
    file: text.describe("Dockerfile path relative to the workspace"),
    context: text
      .optional()
      .describe("build context relative to the workspace; default the Dockerfile's directory"),
    args: z
      .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string().refine(noNul))
      .optional()
      .describe("build arguments (--build-arg NAME=value)"),
  }),
]);

function dockerSchema<F extends Flavour>(flavour: F) {
  const d = configDefaults.docker;
  return z
    .strictObject({
      image: text
        .optional()
        .describe("Image reference; default cordon-sandbox:<hash> from `cordon image build`"),
      dockerfile: projectDockerfile
        .optional()
        .describe("Build the sandbox image from the project's Dockerfile (docs/images.md)"),
      devcontainer: text
        .optional()
        .describe("Build the sandbox image from the project's devcontainer.json (docs/images.md)"),
      containerPrefix: field(
        flavour,
        z
          .string()
          .regex(/^[a-z0-9][a-z0-9_.-]{0,19}$/, {
            error: "a container prefix is 1-20 lowercase letters, digits, '_', '.' or '-'",
          })
          .describe("Container name prefix (1-20 of a-z 0-9 _ . -)"),
        d.containerPrefix,
      ),
      workdir: field(
        flavour,
        text.describe("Where the workspace is mounted and commands start"),
        d.workdir,
      ),
      readOnlyRoot: field(
        flavour,
        z
          .boolean()
          .describe("Read-only root file system: writes go to the workspace and the tmpfs mounts"),
        d.readOnlyRoot,
      ),
      tmpfs: field(
        flavour,
        z
          .record(z.string(), text.nullable())
          .describe(
            "Mount point → tmpfs options (rw,nosuid,nodev,exec,size=…); without exec Docker adds noexec; null removes an inherited one",
          ),
        { ...d.tmpfs },
      ),
      network: field(
        flavour,
        text.describe(
          '"none" (default: loopback only), "bridge" or a network name; host and container:<name> need a dangerouslyAllow key',
        ),
        d.network,
      ),
      user: field(
        flavour,
        text.describe(
          "uid[:gid] the sandbox runs as; \"auto\": cordon's own uid for a private copy, else the mounted workspace's owner (never root)",
        ),
        d.user,
      ),
      capDrop: field(
        flavour,
        z.array(text).describe("Linux capabilities dropped (none can be added)"),
        [...d.capDrop],
      ),
      env: field(
        flavour,
        z
          .record(z.string(), z.string().refine(noNul).nullable())
          .describe(
            "The sandbox's whole environment (nothing comes from the host); null removes an inherited one; credential-like names are refused",
          ),
        {},
      ),
      memory: field(
        flavour,
        byteSize.describe('Memory limit: bytes, or "512m", "1.5g" (powers of 1024)'),
        d.memory,
      ),
      memorySwap: byteSize
        .optional()
        .describe(
          "Memory plus swap; default equal to memory (no swap); less than memory is an error",
        ),
      cpus: field(flavour, z.number().positive().max(1024).describe("CPU limit in cores"), d.cpus),
      pidsLimit: field(
        flavour,
        z
          .number()
          .int()
          .min(1)
          .max(4_194_304)
          .describe("Most processes in the container (a fork bomb stops here)"),
        d.pidsLimit,
      ),
      ulimits: field(
        flavour,
        z
          .partialRecord(z.enum(ulimitNames), ulimit)
          .describe("Resource limits: { nofile: 1024 } or { nofile: { soft: 1024, hard: 2048 } }"),
        {},
      ),
      seccompProfile: text
        .optional()
        .describe(
          '"default" or an absolute path to a profile; "unconfined" needs dangerouslyAllowUnconfined. Default: Docker\'s',
        ),
      apparmorProfile: text
        .optional()
        .describe(
          'An AppArmor profile name; "unconfined" needs dangerouslyAllowUnconfined. Default: Docker\'s',
        ),
      dns: field(
        flavour,
        z.array(z.union([z.ipv4(), z.ipv6()])).describe("DNS server addresses"),
        [],
      ),
      extraHosts: field(
        flavour,
        z.array(text).describe('"host:ip" entries for /etc/hosts ("host:host-gateway" works)'),
        [],
      ),
      binds: field(
        flavour,
        z
          .array(bind)
          .describe(
            'Extra bind mounts: "/host:/container[:ro|rw]" or { source, target, readOnly }; read-only unless rw',
          ),
        [],
      ),
      bindRoots: z
        .array(text)
        .optional()
        .describe(
          "Directories bind sources must lie in; default: the agent workspace and the home directory",
        ),
      executor: field(
        flavour,
        z
          .enum(["resident", "exec"])
          .describe(
            "How calls reach the container: resident (cordon's executor, one stream, no Docker exec per call) or exec (one Docker exec per call)",
          ),
        d.executor,
      ),
      runtime: z
        .string()
        .regex(/^[A-Za-z0-9_.-]+$/)
        .optional()
        .describe('The OCI runtime, e.g. "runsc" for gVisor; default: the engine\'s'),
      dangerouslyAllowHostNetwork: field(
        flavour,
        z.boolean().describe('Allow network "host": the sandbox shares the host\'s network'),
        false,
      ),
      dangerouslyAllowContainerNamespaceJoin: field(
        flavour,
        z
          .boolean()
          .describe(
            'Allow network "container:<name>": join another container\'s network namespace',
          ),
        false,
      ),
      dangerouslyAllowUnconfined: field(
        flavour,
        z.boolean().describe('Allow "unconfined" seccomp or AppArmor profiles'),
        false,
      ),
      dangerouslyAllowExternalBindSources: field(
        flavour,
        z.boolean().describe("Allow bind sources outside bindRoots (protected paths stay refused)"),
        false,
      ),
      dangerouslyAllowEnvNames: field(
        flavour,
        z.array(text).describe("Credential-like env names to pass to the sandbox anyway"),
        [],
      ),
    })
    .describe(
      "Container settings; under scope `shared` only agents.defaults.sandbox.docker counts",
    );
}

function sandboxSchema<F extends Flavour>(flavour: F) {
  const s = configDefaults.sandbox;
  const docker = dockerSchema(flavour);
  const prune = z.strictObject({
    stopIdleMinutes: field(
      flavour,
      z
        .number()
        .nonnegative()
        .describe(
          "Stop (not remove) a container idle this long, so it holds no memory; the next acquire starts it again with its files. 0 = never",
        ),
      s.prune.stopIdleMinutes,
    ),
    idleHours: field(
      flavour,
      z.number().nonnegative().describe("Remove a container idle this long, in hours. 0 = never"),
      s.prune.idleHours,
    ),
    maxAgeDays: field(
      flavour,
      z.number().nonnegative().describe("Remove a container this old, in days. 0 = never"),
      s.prune.maxAgeDays,
    ),
  });
  const pool = z.strictObject({
    size: field(
      flavour,
      z
        .number()
        .int()
        .min(0)
        .max(16)
        .describe(
          "Started containers kept ready for new sandboxes of this shape (0-16); a new session takes one instead of creating its own. 0 = no pool (docs/pool.md)",
        ),
      s.pool.size,
    ),
  });
  const egress = z
    .strictObject({
      allow: field(
        flavour,
        z
          .array(text)
          .describe(
            'Hosts the sandbox may reach through the egress proxy: "registry.npmjs.org", "*.pythonhosted.org"',
          ),
        [...s.egress.allow],
      ),
      trustHostCertificates: field(
        flavour,
        z
          .boolean()
          .describe(
            "Mount the host's CA bundle and point SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, PIP_CERT and REQUESTS_CA_BUNDLE at it (networks that inspect TLS)",
          ),
        s.egress.trustHostCertificates,
      ),
    })
    .describe("Network by allowlist: an egress proxy admits only these hosts (docs/network.md)");
  return z.strictObject({
    mode: field(
      flavour,
      z
        .enum(sandboxModes)
        .describe(
          "Which sessions are sandboxed: off (tools on the host, confined to the workspace; trusted use only), non-main (all but the agent's main session), all",
        ),
      s.mode,
    ),
    scope: field(
      flavour,
      z
        .enum(sandboxScopes)
        .describe("Which sessions of a workspace share one container: session, agent or shared"),
      s.scope,
    ),
    workspaceAccess: field(
      flavour,
      z
        .enum(workspaceAccessModes)
        .describe(
          "none: a private /workspace (a seeded copy); ro: the workspace read-only at /agent; rw: the workspace read-write at /workspace",
        ),
      s.workspaceAccess,
    ),
    seed: field(
      flavour,
      z
        .boolean()
        .describe(
          "With workspaceAccess none: the private workspace starts as a copy of the workspace (review with cordon diff)",
        ),
      s.seed,
    ),
    workspaceRoot: text
      .optional()
      .describe("Where private workspaces live; default <state dir>/workspaces"),
    disk: field(flavour, diskSize, s.disk),
    carry: field(flavour, carryList, s.carry),
    seedInclude: field(flavour, seedIncludeList, s.seedInclude),
    protectGitDir: field(
      flavour,
      z
        .boolean()
        .describe(
          "With rw: mount the workspace's .git read-only, so the agent cannot plant hooks or config your git runs later",
        ),
      s.protectGitDir,
    ),
    workspaceStorage: field(
      flavour,
      z
        .enum(workspaceStorageModes)
        .describe(
          'Where a private copy lives: "host" a directory (or disk image) under the state directory, bound into the sandbox; "volume" a Docker volume on the engine, seeded by streaming; "auto" host on a local engine, volume on one that does not share this host\'s filesystem',
        ),
      s.workspaceStorage,
    ),
    checkpoints: field(
      flavour,
      z
        .enum(checkpointModes)
        .describe(
          'With a seeded private copy: "turn" records its state before each turn\'s tools run, so `cordon rollback --turn -1` undoes the last turn (shell commands too); "off" records none',
        ),
      s.checkpoints,
    ),
    sessionToolsVisibility: field(
      flavour,
      z
        .enum(sessionToolsVisibilities)
        .describe(
          'Which sessions the session tools (sessions_list, sessions_history, sessions_send) show a sandboxed session: "spawned" (only the subagents it spawned) or "all" (every session of the project)',
        ),
      s.sessionToolsVisibility,
    ),
    prune: section(flavour, prune.describe("When idle or old containers are stopped and removed")),
    pool: section(flavour, pool.describe("A warm pool of started containers (docs/pool.md)")),
    egress: section(flavour, egress),
    docker: section(flavour, docker),
  });
}

const allowList = toolNameList
  .optional()
  .describe(
    "Only these tools (names, aliases, group:<name>, globs); an empty list means every tool",
  );
const alsoAllowList = toolNameList.optional().describe("Tools added to the profile and to allow");
const denyList = toolNameList.optional().describe("Never these tools; deny always wins");
const toolLayer = z.strictObject({
  allow: allowList,
  alsoAllow: alsoAllowList,
  deny: denyList,
});

const execSettings = z.strictObject({
  timeoutSec: z
    .number()
    .int()
    .min(1)
    .max(3600)
    .optional()
    .describe("Default exec timeout in seconds, 1-3600 (a call may ask for less)"),
  maxOutputBytes: z
    .number()
    .int()
    .min(1024)
    .optional()
    .describe("Cap on the output an exec keeps, in bytes (its head and tail)"),
});

function toolsSchema<F extends Flavour>(flavour: F) {
  return z.strictObject({
    profile: field(
      flavour,
      z
        .enum(toolProfiles)
        .describe(
          "The base tool set: minimal (read, ls, find, grep), coding (group:fs and group:runtime), full (every tool)",
        ),
      configDefaults.tools.profile,
    ),
    allow: allowList,
    alsoAllow: alsoAllowList,
    deny: denyList,
    sandbox: z
      .strictObject({
        tools: toolLayer
          .optional()
          .describe("allow / alsoAllow / deny applied on top, only in sandboxed sessions"),
      })
      .optional()
      .describe("Tool rules for sandboxed sessions only"),
    exec: (flavour === "defaults"
      ? execSettings.prefault({ timeoutSec: configDefaults.tools.execTimeoutSec })
      : execSettings.optional()
    ).describe("Settings of the exec tool"),
    /** Longest one tool call may run before it is stopped (its command killed), in seconds. */
    callTimeoutSec: field(
      flavour,
      z
        .number()
        .int()
        .min(1)
        .max(86_400)
        .describe(
          "Longest one tool call may run, in seconds (1-86400): past it its command is killed and the model gets an error result",
        ),
      configDefaults.tools.callTimeoutSec,
    ),
  });
}

const envVariableName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, {
  message: "must be an environment variable name (letters, digits, _)",
});

const primaryModel = text.describe("The model a run calls first, e.g. claude-sonnet-4-6");
const fallbackModels = z
  .array(text)
  .describe("Models tried in order when the current one keeps failing");
const contextWindow = z
  .number()
  .int()
  .min(2048)
  .max(10_000_000)
  .describe(
    `The model's context window in tokens (default ${configDefaults.contextWindowTokens}); a request that would not fit is compacted first`,
  );

const modelObject = z.strictObject({
  primary: primaryModel.optional(),
  fallbacks: fallbackModels.optional(),
});
/** `"claude-…"` or `{ primary, fallbacks }`. */
const modelRef = z
  .union([text, modelObject])
  .describe('A model id ("claude-sonnet-4-6") or { primary, fallbacks }');

/** A workspace file, relative to the workspace: no absolute path, no `..`, no NUL. */
const workspaceFile = text.refine(
  (file) => !file.startsWith("/") && !file.split("/").includes(".."),
  { error: "a bootstrap file is a path relative to the workspace, without '..'" },
);
const promptMode = z.enum(promptModes);
/** The workspace files read into the system prompt, and how much of each. */
const bootstrapSchema = z
  .strictObject({
    files: z
      .array(workspaceFile)
      .describe("Workspace files read into the system prompt, in order (relative paths, no ..)")
      .optional(),
    maxBytes: z
      .number()
      .int()
      .positive()
      .max(1024 * 1024)
      .describe("Most bytes of each bootstrap file in the prompt (1 to 1 MiB); the rest is cut")
      .optional(),
  })
  .describe("The workspace files read into the system prompt");

/**
 * The agent program (docs/runtimes.md): cordon's own loop, Claude Code, or any command; each runs
 * in the same sandbox.
 */
export const agentRuntimes = ["cordon", "claude-code"] as const;
const agentRuntime = z
  .union([
    z.enum(agentRuntimes),
    z.strictObject({
      command: z
        .array(text)
        .min(1)
        .describe("The agent program and its arguments, run in the sandbox"),
      prompt: z
        .enum(["argument", "stdin"])
        .optional()
        .describe("How the task reaches it: as its last argument (default) or on stdin"),
    }),
  ])
  .describe(
    'The agent program: "cordon" (default), "claude-code", or { command: [...], prompt: "argument" | "stdin" }',
  );

export type AgentRuntimeName = (typeof agentRuntimes)[number];
export type AgentRuntimeConfig = z.infer<typeof agentRuntime>;

/** Agent ids a session of this agent may start subagents of (`sessions_spawn`). */
const allowAgents = z
  .array(z.union([z.literal("*"), agentId]))
  .describe(
    'Agent ids this agent may start subagents of with sessions_spawn ("*": any agent); default: only its own id',
  );
const subagentModel = text.describe(
  "The model a subagent of this agent runs, unless sessions_spawn names one; default the agent's own model",
);
/** Per agent: whom it may spawn and with which model. */
const agentSubagents = z
  .strictObject({ allowAgents: allowAgents.optional(), model: subagentModel.optional() })
  .describe("Subagents this agent may start (sessions_spawn)");
/** For every agent, plus the lane all child runs of one process share. */
const defaultSubagents = z
  .strictObject({
    allowAgents: allowAgents.optional(),
    model: subagentModel.optional(),
    maxConcurrent: z
      .number()
      .int()
      .min(1)
      .max(64)
      .default(configDefaults.subagents.maxConcurrent)
      .describe(
        "Child runs (sessions_spawn, sessions_send) in flight at once in one cordon process, in a lane of their own (1-64)",
      ),
  })
  .prefault({})
  .describe("Subagents every agent may start, and the lane their runs share");

const thinking = z
  .enum(thinkingLevels)
  .describe("How much the model thinks before answering (off, minimal, low, medium, high, …)");
const promptModeField = promptMode.describe(
  "How much the system prompt says: full, minimal (of the bootstrap files only AGENTS.md and TOOLS.md) or none",
);
const agentEntry = z.strictObject({
  id: agentId.describe('The agent id, written any way, used normalised ("Ops Team" → ops-team)'),
  default: z
    .boolean()
    .optional()
    .describe("The agent used when none is named (at most one; else the first)"),
  name: text.optional().describe("A display name"),
  workspace: text.optional().describe("This agent's workspace on the host"),
  model: modelRef.optional(),
  runtime: agentRuntime.optional(),
  sandbox: sandboxSchema("partial")
    .optional()
    .describe("Sandbox keys overriding agents.defaults.sandbox for this agent"),
  tools: toolsSchema("partial")
    .optional()
    .describe("Tool rules overriding agents.defaults.tools key by key (lists replace)"),
  thinking: thinking.optional(),
  promptMode: promptModeField.optional(),
  bootstrap: bootstrapSchema.optional(),
  /** The model's context window in tokens; requests that would not fit are compacted first. */
  contextWindow: contextWindow.optional(),
  subagents: agentSubagents.optional(),
});

/** Agent ids are unique and at most one agent is the default. */
function checkAgentList(list: unknown, ctx: z.RefinementCtx): void {
  if (!Array.isArray(list)) return;
  const seen = new Map<unknown, number>();
  let defaults = 0;
  list.forEach((agent: unknown, index) => {
    if (typeof agent !== "object" || agent === null) return;
    const { id: written, default: isDefault } = agent as { id?: unknown; default?: unknown };
    // "Ops" and "ops " are one agent once normalised.
    const id = typeof written === "string" ? normalizeAgentId(written) : written;
    const first = seen.get(id);
    if (typeof id === "string" && first !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: [index, "id"],
        message: `duplicate agent id "${id}" (also agents.list[${first}])`,
      });
    } else {
      seen.set(id, index);
    }
    if (isDefault === true && ++defaults > 1) {
      ctx.addIssue({
        code: "custom",
        path: [index, "default"],
        message: "more than one agent has default: true",
      });
    }
  });
}

const agentDefaults = z.strictObject({
  workspace: text
    .optional()
    .describe("The agent workspace on the host; default: the working directory cordon runs in"),
  model: modelRef.optional(),
  thinking: thinking.optional(),
  runtime: agentRuntime.optional(),
  contextWindow: contextWindow.optional(),
  sandbox: sandboxSchema("defaults")
    .prefault({})
    .describe("Sandbox settings for every agent, with the built-in defaults"),
  tools: toolsSchema("partial").optional().describe("The tool rules every agent starts from"),
  subagents: defaultSubagents,
  promptMode: promptModeField
    .optional()
    .describe(
      "How much the system prompt says: full, minimal (of the bootstrap files only AGENTS.md and TOOLS.md) or none; default full, minimal in subagent sessions",
    ),
  bootstrap: z
    .strictObject({
      files: bootstrapSchema.shape.files.unwrap().default([...configDefaults.bootstrap.files]),
      maxBytes: bootstrapSchema.shape.maxBytes.unwrap().default(configDefaults.bootstrap.maxBytes),
    })
    .prefault({})
    .describe("The workspace files read into the system prompt"),
});

export const cordonConfigSchema = z.strictObject({
  $schema: z.string().optional().describe("The JSON Schema this file follows (editor support)"),
  model: z
    .union([
      text,
      z.strictObject({
        primary: primaryModel.default(configDefaults.model.primary),
        fallbacks: fallbackModels.default([]),
        /**
         * Variables holding the API keys, used in turn (one name or a list); default
         * ANTHROPIC_API_KEYS, else ANTHROPIC_API_KEY. Keys themselves never go in a file.
         */
        apiKeyEnv: z
          .union([envVariableName, z.array(envVariableName).min(1)])
          .optional()
          .describe(
            "Environment variables holding API keys, used in turn; default ANTHROPIC_API_KEYS, else ANTHROPIC_API_KEY",
          ),
      }),
    ])
    .default({ primary: configDefaults.model.primary, fallbacks: [] })
    .describe('The model: an id ("claude-sonnet-4-6") or { primary, fallbacks, apiKeyEnv }'),
  tools: toolsSchema("defaults")
    .extend({
      agentToAgent: z
        .strictObject({
          enabled: z
            .boolean()
            .default(false)
            .describe(
              "Let session tools (sessions_list, sessions_history, sessions_send) reach sessions of other agents",
            ),
          allow: z
            .array(z.union([z.literal("*"), agentId]))
            .default([])
            .describe(
              'Agent ids whose sessions they may reach when enabled ("*": any; empty: none)',
            ),
        })
        .prefault({})
        .describe(
          "Agent-to-agent: whether a session's tools may read or message sessions of other agents (a subagent it spawned is always its own)",
        ),
    })
    .prefault({})
    .describe("Which tools the agent gets (profile, allow, deny) and their settings"),
  fixTests: z
    .strictObject({
      protect: z
        .array(text)
        .default([])
        .describe("Globs of more files cordon fix-tests protects as test harness (*.sql, db/**)"),
    })
    .prefault({})
    .describe("Settings of cordon fix-tests"),
  agents: z
    .strictObject({
      defaults: agentDefaults
        .prefault({})
        .describe("Settings every agent starts from (the environment and flags beat them)"),
      list: z
        .array(agentEntry)
        // Runs even when entries have other problems, so every issue is reported at once.
        .superRefine(checkAgentList, { when: () => true })
        .default([])
        .describe("The agents; without a list there is one agent, main"),
    })
    .prefault({})
    .describe("The agents and their defaults"),
});

/** The config as the file and flags may write it (everything optional). */
export type CordonConfigInput = z.input<typeof cordonConfigSchema>;
/** The parsed config with the built-in defaults applied. */
export type CordonConfig = z.output<typeof cordonConfigSchema>;
export type AgentConfig = CordonConfig["agents"]["list"][number];
export type SandboxConfig = CordonConfig["agents"]["defaults"]["sandbox"];
export type DockerConfig = SandboxConfig["docker"];
export type AgentSandboxConfig = NonNullable<AgentConfig["sandbox"]>;
export type AgentDockerConfig = NonNullable<AgentSandboxConfig["docker"]>;
export type ToolsConfig = CordonConfig["tools"];
export type AgentToolsConfig = NonNullable<AgentConfig["tools"]>;
export type ToolLayerConfig = z.output<typeof toolLayer>;
export type ModelRef = NonNullable<AgentConfig["model"]>;
export type BindConfig = z.output<typeof bind>;
export type SandboxMode = (typeof sandboxModes)[number];
export type PromptMode = (typeof promptModes)[number];
export type SandboxScope = (typeof sandboxScopes)[number];
export type WorkspaceAccess = (typeof workspaceAccessModes)[number];
export type ToolProfile = (typeof toolProfiles)[number];
export type ThinkingLevel = (typeof thinkingLevels)[number];
export type SessionToolsVisibility = (typeof sessionToolsVisibilities)[number];
