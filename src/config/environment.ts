import path from "node:path";

import { ConfigError } from "../common/errors.js";
import { logLevels, type LogLevel } from "../common/logger.js";
import { sandboxModes, sandboxScopes, toolProfiles, workspaceAccessModes } from "./choices.js";

/**
 * Every environment variable cordon reads, what each accepts, and the one check of its value: a
 * bad value ends the command at once (exit 2) with one line naming the variable, the value and
 * what is accepted, instead of failing later somewhere deep (pino on a log level, Docker on an
 * image name, the SDK on a URL). Secrets are named, never shown. An empty value means unset.
 * docs/configuration.md lists the same variables; keep the two in step.
 */
export interface EnvironmentVariable {
  readonly name: string;
  /** What the variable is for, one line (docs, `cordon doctor`). */
  readonly purpose: string;
  /** What it accepts, as the error says it: "one of a, b", "an absolute path". */
  readonly accepts: string;
  /** The config key it sets, when it is a config layer (it beats the file). */
  readonly configKey?: string;
  /** The choices, when there is a fixed set. */
  readonly values?: readonly string[];
  /** A secret: errors name the variable but never print its value. */
  readonly secret?: boolean;
  /** Whether a (non-empty) value is acceptable. */
  readonly valid: (value: string) => boolean;
}

const oneOf = (values: readonly string[]) => ({
  values,
  accepts: `one of ${values.join(", ")}`,
  valid: (value: string) => values.includes(value),
});

/** No whitespace or control characters inside (a pasted key with a stray space or newline). */
const token = (value: string): boolean => /^[\x21-\x7e]+$/.test(value.trim());

/**
 * A Docker image reference: `[host[:port]/]name[:tag][@sha256:digest]`, name components
 * lower-case (Docker's reference grammar, distribution/reference).
 */
const imageReference =
  /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::\d+)?\/)?[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*(?::\w[\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;
const image = {
  accepts: "a Docker image reference such as debian:bookworm-slim or ghcr.io/org/image:tag",
  valid: (value: string) => imageReference.test(value),
};

const httpUrl = (value: string): boolean => {
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:";
  } catch {
    return false;
  }
};

export const environmentVariables: readonly EnvironmentVariable[] = [
  {
    name: "CORDON_HOME",
    purpose: "the state directory (sessions, private copies, trust store); default ~/.cordon",
    accepts: "an absolute directory path",
    valid: (value) => path.isAbsolute(value),
  },
  {
    name: "CORDON_CONFIG",
    purpose: "the config file to use (an empty value: none)",
    accepts: "a config file path",
    valid: () => true,
  },
  {
    name: "CORDON_LOG_LEVEL",
    purpose: "how much cordon logs on stderr; default info",
    ...oneOf(logLevels),
  },
  {
    name: "CORDON_DEBUG",
    purpose: "1: errors print their stack trace",
    ...oneOf(["1", "0", "true", "false"]),
  },
  {
    name: "CORDON_MODEL",
    purpose: "the model id to call",
    configKey: "agents.defaults.model.primary",
    accepts: "a model id without spaces, e.g. claude-sonnet-4-6",
    valid: token,
  },
  {
    name: "CORDON_SANDBOX_MODE",
    purpose: "which runs get a sandbox",
    configKey: "agents.defaults.sandbox.mode",
    ...oneOf(sandboxModes),
  },
  {
    name: "CORDON_SANDBOX_SCOPE",
    purpose: "which runs share a container",
    configKey: "agents.defaults.sandbox.scope",
    ...oneOf(sandboxScopes),
  },
  {
    name: "CORDON_WORKSPACE_ACCESS",
    purpose: "how the sandbox sees the workspace",
    configKey: "agents.defaults.sandbox.workspaceAccess",
    ...oneOf(workspaceAccessModes),
  },
  {
    name: "CORDON_SANDBOX_IMAGE",
    purpose: "the sandbox image instead of the one cordon builds",
    configKey: "agents.defaults.sandbox.docker.image",
    ...image,
  },
  {
    name: "CORDON_RUNTIME",
    purpose:
      "the container runtime of the sandboxes, e.g. runsc for gVisor (scripts/setup.sh installs and registers it)",
    configKey: "agents.defaults.sandbox.docker.runtime",
    accepts: "a runtime name registered with the engine, such as runsc",
    valid: (value: string) => /^[A-Za-z0-9_.-]+$/.test(value),
  },
  {
    name: "CORDON_BASE_IMAGE",
    purpose: "the base image cordon builds its sandbox image from; default debian:bookworm-slim",
    ...image,
  },
  {
    name: "CORDON_TOOLS_PROFILE",
    purpose: "the set of tools offered",
    configKey: "agents.defaults.tools.profile",
    ...oneOf(toolProfiles),
  },
  {
    name: "ANTHROPIC_API_KEY",
    purpose: "the Anthropic API key",
    accepts: "an API key without spaces or line breaks inside",
    secret: true,
    valid: token,
  },
  {
    name: "ANTHROPIC_API_KEYS",
    purpose: "several API keys, comma-separated, taking turns",
    accepts: "API keys separated by commas, none with spaces or line breaks inside",
    secret: true,
    valid: (value) => value.split(",").every((key) => key.trim() === "" || token(key)),
  },
  {
    name: "ANTHROPIC_AUTH_TOKEN",
    purpose: "a bearer token instead of an API key (gateways)",
    accepts: "a token without spaces or line breaks inside",
    secret: true,
    valid: token,
  },
  {
    name: "ANTHROPIC_BASE_URL",
    purpose: "another server that speaks the Messages API",
    accepts: "an http:// or https:// URL",
    valid: httpUrl,
  },
];

/** What the CLI itself takes from the environment, checked. */
export interface CheckedEnvironment {
  logLevel: LogLevel;
  /** CORDON_DEBUG: errors print their stack. */
  debug: boolean;
}

/**
 * Checks every variable cordon reads in `env`; throws a `ConfigError` (exit 2) for the first bad
 * one. Called once, before any command runs.
 */
export function checkEnvironment(
  env: Readonly<Record<string, string | undefined>>,
): CheckedEnvironment {
  for (const variable of environmentVariables) {
    const value = env[variable.name];
    if (value === undefined || value === "" || variable.valid(value)) continue;
    throw invalidVariable(variable, value);
  }
  const level = env["CORDON_LOG_LEVEL"];
  return {
    logLevel: logLevels.find((known) => known === level) ?? "info",
    debug: env["CORDON_DEBUG"] === "1" || env["CORDON_DEBUG"] === "true",
  };
}

/** The error for a bad value: the variable, the value (unless secret) and what it accepts. */
export function invalidVariable(variable: EnvironmentVariable, value: string): ConfigError {
  const shown = variable.secret ? "(value not shown)" : JSON.stringify(value);
  return new ConfigError(`${variable.name}=${shown} is not valid: expected ${variable.accepts}`, {
    fix: `set ${variable.name} to ${variable.accepts}, or unset it`,
  });
}
