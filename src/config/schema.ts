import { z } from "zod";

import { normalizeAgentId } from "./agent-id.js";
import {
  sandboxModes,
  sandboxScopes,
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
  sandbox: {
    mode: "all" as const,
    scope: "session" as const,
    workspaceAccess: "none" as const,
    seed: true,
    /** What the sandbox may write to its private workspace; 0 or "unlimited" = no bound. */
    disk: "10g" as string | number,
    /** Ignored paths of the workspace copied into the seeded copy (e.g. node_modules). */
    carry: [] as string[],
    protectGitDir: true,
    prune: { stopIdleMinutes: 30, idleHours: 24, maxAgeDays: 7 },
    egress: { allow: [] as string[], trustHostCertificates: false },
  },
  docker: {
    containerPrefix: "cordon",
    workdir: "/workspace",
    readOnlyRoot: true,
    tmpfs: {
      "/tmp": "rw,nosuid,nodev,size=256m",
      "/var/tmp": "rw,nosuid,nodev,size=64m",
      "/run": "rw,nosuid,nodev,size=16m",
      // exec: npx and pip run what they cache there (the workspace is executable anyway).
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
  /** Absolute host path (or `~/…`). */
  source: text,
  /** Absolute path inside the container. */
  target: text,
  /** Default true: binds are read-only unless asked otherwise. */
  readOnly: z.boolean().optional(),
});
const bind = z.union([
  text.describe('"/host/path:/container/path[:ro|rw]", read-only unless ":rw"'),
  bindObject,
]);

const ulimit = z.union([
  z.number().int().nonnegative(),
  z.strictObject({ soft: z.number().int().nonnegative(), hard: z.number().int().nonnegative() }),
]);

function dockerSchema<F extends Flavour>(flavour: F) {
  const d = configDefaults.docker;
  return z
    .strictObject({
      image: text.optional(),
      containerPrefix: field(
        flavour,
        z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,19}$/, {
          error: "a container prefix is 1-20 lowercase letters, digits, '_', '.' or '-'",
        }),
        d.containerPrefix,
      ),
      workdir: field(flavour, text, d.workdir),
      readOnlyRoot: field(flavour, z.boolean(), d.readOnlyRoot),
      tmpfs: field(flavour, z.record(z.string(), text.nullable()), { ...d.tmpfs }),
      network: field(flavour, text, d.network),
      user: field(flavour, text, d.user),
      capDrop: field(flavour, z.array(text), [...d.capDrop]),
      env: field(flavour, z.record(z.string(), z.string().refine(noNul).nullable()), {}),
      memory: field(flavour, byteSize, d.memory),
      memorySwap: byteSize.optional(),
      cpus: field(flavour, z.number().positive().max(1024), d.cpus),
      pidsLimit: field(flavour, z.number().int().min(1).max(4_194_304), d.pidsLimit),
      ulimits: field(flavour, z.partialRecord(z.enum(ulimitNames), ulimit), {}),
      seccompProfile: text.optional(),
      apparmorProfile: text.optional(),
      dns: field(flavour, z.array(z.union([z.ipv4(), z.ipv6()])), []),
      extraHosts: field(flavour, z.array(text), []),
      binds: field(flavour, z.array(bind), []),
      bindRoots: z.array(text).optional(),
      executor: field(flavour, z.enum(["resident", "exec"]), d.executor),
      runtime: z
        .string()
        .regex(/^[A-Za-z0-9_.-]+$/)
        .optional(),
      dangerouslyAllowHostNetwork: field(flavour, z.boolean(), false),
      dangerouslyAllowContainerNamespaceJoin: field(flavour, z.boolean(), false),
      dangerouslyAllowUnconfined: field(flavour, z.boolean(), false),
      dangerouslyAllowExternalBindSources: field(flavour, z.boolean(), false),
      dangerouslyAllowEnvNames: field(flavour, z.array(text), []),
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
    idleHours: field(flavour, z.number().nonnegative(), s.prune.idleHours),
    maxAgeDays: field(flavour, z.number().nonnegative(), s.prune.maxAgeDays),
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
      trustHostCertificates: field(flavour, z.boolean(), s.egress.trustHostCertificates),
    })
    .describe("Network by allowlist: an egress proxy admits only these hosts (docs/network.md)");
  return z.strictObject({
    mode: field(flavour, z.enum(sandboxModes), s.mode),
    scope: field(flavour, z.enum(sandboxScopes), s.scope),
    workspaceAccess: field(flavour, z.enum(workspaceAccessModes), s.workspaceAccess),
    seed: field(flavour, z.boolean(), s.seed),
    workspaceRoot: text.optional(),
    disk: field(flavour, diskSize, s.disk),
    carry: field(flavour, carryList, s.carry),
    protectGitDir: field(flavour, z.boolean(), s.protectGitDir),
    prune: section(flavour, prune),
    egress: section(flavour, egress),
    docker: section(flavour, docker),
  });
}

const toolLayer = z.strictObject({
  allow: toolNameList.optional(),
  alsoAllow: toolNameList.optional(),
  deny: toolNameList.optional(),
});

const execSettings = z.strictObject({
  /** Default exec timeout in seconds (a call may ask for less). */
  timeoutSec: z.number().int().min(1).max(3600).optional(),
  /** Cap on the output an exec keeps, in bytes. */
  maxOutputBytes: z.number().int().min(1024).optional(),
});

function toolsSchema<F extends Flavour>(flavour: F) {
  return z.strictObject({
    profile: field(flavour, z.enum(toolProfiles), configDefaults.tools.profile),
    allow: toolNameList.optional(),
    alsoAllow: toolNameList.optional(),
    deny: toolNameList.optional(),
    /** Applied only when the session is sandboxed. */
    sandbox: z.strictObject({ tools: toolLayer.optional() }).optional(),
    exec:
      flavour === "defaults"
        ? execSettings.prefault({ timeoutSec: configDefaults.tools.execTimeoutSec })
        : execSettings.optional(),
    /** Longest one tool call may run before it is stopped (its command killed), in seconds. */
    callTimeoutSec: field(
      flavour,
      z.number().int().min(1).max(86_400),
      configDefaults.tools.callTimeoutSec,
    ),
  });
}

const envVariableName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, {
  message: "must be an environment variable name (letters, digits, _)",
});

const modelObject = z.strictObject({
  primary: text.optional(),
  fallbacks: z.array(text).optional(),
});
/** `"claude-…"` or `{ primary, fallbacks }`. */
const modelRef = z.union([text, modelObject]);

/** A workspace file, relative to the workspace: no absolute path, no `..`, no NUL. */
const workspaceFile = text.refine(
  (file) => !file.startsWith("/") && !file.split("/").includes(".."),
  { error: "a bootstrap file is a path relative to the workspace, without '..'" },
);
const promptMode = z.enum(promptModes);
/** The workspace files read into the system prompt, and how much of each. */
const bootstrapSchema = z.strictObject({
  files: z.array(workspaceFile).optional(),
  /** Bytes of one file, 1 to 1 MiB. */
  maxBytes: z
    .number()
    .int()
    .positive()
    .max(1024 * 1024)
    .optional(),
});

/**
 * The agent program (docs/runtimes.md): cordon's own loop, Claude Code, or any command; each runs
 * in the same sandbox.
 */
export const agentRuntimes = ["cordon", "claude-code"] as const;
const agentRuntime = z
  .union([
    z.enum(agentRuntimes),
    z.strictObject({
      command: z.array(text).min(1),
      prompt: z.enum(["argument", "stdin"]).optional(),
    }),
  ])
  .describe(
    'The agent program: "cordon" (default), "claude-code", or { command: [...], prompt: "argument" | "stdin" }',
  );

export type AgentRuntimeName = (typeof agentRuntimes)[number];
export type AgentRuntimeConfig = z.infer<typeof agentRuntime>;

const agentEntry = z.strictObject({
  id: agentId,
  /** The agent used when none is named; at most one. */
  default: z.boolean().optional(),
  name: text.optional(),
  workspace: text.optional(),
  model: modelRef.optional(),
  runtime: agentRuntime.optional(),
  sandbox: sandboxSchema("partial").optional(),
  tools: toolsSchema("partial").optional(),
  /** How much the model thinks before answering (docs/configuration.md: the token budgets). */
  thinking: z.enum(thinkingLevels).optional(),
  promptMode: promptMode.optional(),
  bootstrap: bootstrapSchema.optional(),
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
  /** The agent workspace; default: the working directory cordon runs in. */
  workspace: text.optional(),
  model: modelRef.optional(),
  thinking: z.enum(thinkingLevels).optional(),
  runtime: agentRuntime.optional(),
  sandbox: sandboxSchema("defaults").prefault({}),
  tools: toolsSchema("partial").optional(),
  /** full (default): every section and bootstrap file; minimal: AGENTS.md and TOOLS.md; none. */
  promptMode: promptMode.default("full"),
  bootstrap: z
    .strictObject({
      files: bootstrapSchema.shape.files.unwrap().default([...configDefaults.bootstrap.files]),
      maxBytes: bootstrapSchema.shape.maxBytes.unwrap().default(configDefaults.bootstrap.maxBytes),
    })
    .prefault({}),
});

export const cordonConfigSchema = z.strictObject({
  $schema: z.string().optional(),
  model: z
    .union([
      text,
      z.strictObject({
        primary: text.default(configDefaults.model.primary),
        fallbacks: z.array(text).default([]),
        /**
         * Variables holding the API keys, used in turn (one name or a list); default
         * ANTHROPIC_API_KEYS, else ANTHROPIC_API_KEY. Keys themselves never go in a file.
         */
        apiKeyEnv: z.union([envVariableName, z.array(envVariableName).min(1)]).optional(),
      }),
    ])
    .default({ primary: configDefaults.model.primary, fallbacks: [] }),
  tools: toolsSchema("defaults").prefault({}),
  fixTests: z
    .strictObject({
      /** Globs of more files `cordon fix-tests` protects as test harness (`*.sql`, `db/**`). */
      protect: z.array(text).default([]),
    })
    .prefault({}),
  agents: z
    .strictObject({
      defaults: agentDefaults.prefault({}),
      list: z
        .array(agentEntry)
        // Runs even when entries have other problems, so every issue is reported at once.
        .superRefine(checkAgentList, { when: () => true })
        .default([]),
    })
    .prefault({}),
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
